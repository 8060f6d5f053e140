package privdir

import (
	"fmt"
	"os"
)

// Check refuses path unless it is a directory. Windows permissions are
// ACLs, which this package does not judge.
func (w Want) Check(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory (%s): a trusted directory must be a real directory", path, st.Mode().Type())
	}
	return nil
}
