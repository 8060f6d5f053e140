//go:build !unix

package volcmd

import "os"

// allocatedBytes is not known on this platform.
func allocatedBytes(fi os.FileInfo) int64 { return -1 }
