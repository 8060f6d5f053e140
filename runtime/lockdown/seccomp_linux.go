package lockdown

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Insn is a classic BPF instruction (a seccomp filter's) whose jump
// targets are labels, resolved by Assemble.
type Insn struct {
	Code   uint16
	K      uint32
	Jt, Jf string // labels; "" is the next instruction
	Label  string // this instruction's label
}

// Assemble resolves labels into relative jumps (forward only, < 256).
func Assemble(insns []Insn) ([]unix.SockFilter, error) {
	at := map[string]int{}
	for i, in := range insns {
		if in.Label != "" {
			if _, dup := at[in.Label]; dup {
				return nil, fmt.Errorf("seccomp: label %q twice", in.Label)
			}
			at[in.Label] = i
		}
	}
	rel := func(i int, l string) (uint8, error) {
		if l == "" {
			return 0, nil
		}
		to, ok := at[l]
		if !ok || to <= i || to-i-1 > 255 {
			return 0, fmt.Errorf("seccomp: bad jump from %d to %q", i, l)
		}
		return uint8(to - i - 1), nil
	}
	p := make([]unix.SockFilter, len(insns))
	for i, in := range insns {
		jt, err := rel(i, in.Jt)
		if err != nil {
			return nil, err
		}
		jf, err := rel(i, in.Jf)
		if err != nil {
			return nil, err
		}
		p[i] = unix.SockFilter{Code: in.Code, K: in.K, Jt: jt, Jf: jf}
	}
	return p, nil
}
