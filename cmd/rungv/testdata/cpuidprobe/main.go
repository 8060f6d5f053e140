// Command cpuidprobe is a guest program for TestGuestCPUIDNative: it runs
// the cpuid instruction for a fixed list of leaves and prints one line
// per leaf, "LEAF.SUBLEAF EAX EBX ECX EDX" in hex, the same on a host and
// in an episode. Leaf 1's EBX bits 31–24 (the initial APIC ID of the CPU
// the thread happens to run on) are cleared.
package main

import "fmt"

// cpuid runs the instruction (cpuid_amd64.s).
func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// leaves are those the test compares: ones gVisor's emulation answers from
// the host (0, 1, 7, 0x80000001) and ones it answers with zeros (6, 0xa,
// 0x16, 0x40000000), so that an emulated cpuid shows.
var leaves = [][2]uint32{{0, 0}, {1, 0}, {6, 0}, {7, 0}, {0xa, 0}, {0x16, 0}, {0x40000000, 0}, {0x80000001, 0}}

func main() {
	for _, l := range leaves {
		a, b, c, d := cpuid(l[0], l[1])
		if l[0] == 1 {
			b &^= 0xff << 24
		}
		fmt.Printf("%#x.%d %08x %08x %08x %08x\n", l[0], l[1], a, b, c, d)
	}
}
