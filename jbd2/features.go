package jbd2

import "z.gfire.dev/gvx/jbd2/internal/disk"

// Feature bit types, one per superblock field so they cannot be mixed.
type (
	CompatFeature   = disk.CompatFeature
	IncompatFeature = disk.IncompatFeature
	RoCompatFeature = disk.RoCompatFeature
)

// Feature bits (JBD2_FEATURE_*).
const (
	CompatChecksum      = disk.CompatChecksum
	IncompatRevoke      = disk.IncompatRevoke
	Incompat64Bit       = disk.Incompat64Bit
	IncompatAsyncCommit = disk.IncompatAsyncCommit
	IncompatCsumV2      = disk.IncompatCsumV2
	IncompatCsumV3      = disk.IncompatCsumV3
	IncompatFastCommit  = disk.IncompatFastCommit
)

// Features is the feature set in a journal superblock.
//
// The zero value is what Debian's mkfs.ext4 (e2fsprogs 1.47) writes into a
// new internal journal: no features at all. Linux turns on 64bit and
// checksum v3 (crc32c) the first time it mounts an ext4 filesystem with the
// 64bit and metadata_csum features, and revoke when it first revokes; a
// writer does the same with (*Journal).SetFeatures(KernelFeatures).
type Features struct {
	Compat   CompatFeature
	Incompat IncompatFeature
	RoCompat RoCompatFeature
}

// KernelFeatures is what Linux 6.x sets on the journal of a 64bit,
// metadata_csum ext4 filesystem at mount: 64bit block numbers and checksum
// v3 with crc32c.
var KernelFeatures = Features{Incompat: Incompat64Bit | IncompatCsumV3}

// Supported feature masks: a journal with any other incompat or ro_compat
// bit is refused with ErrUnsupported.
const (
	supportedIncompat = IncompatRevoke | Incompat64Bit | IncompatCsumV2 | IncompatCsumV3
	supportedRoCompat = RoCompatFeature(0)
)

func (f Features) check() error {
	if bad := f.Incompat &^ supportedIncompat; bad != 0 {
		return unsupportedf("incompat features %#x", uint32(bad))
	}
	if bad := f.RoCompat &^ supportedRoCompat; bad != 0 {
		return unsupportedf("ro_compat features %#x", uint32(bad))
	}
	if f.Incompat&IncompatCsumV2 != 0 && f.Incompat&IncompatCsumV3 != 0 {
		return unsupportedf("both checksum v2 and v3")
	}
	return nil
}
