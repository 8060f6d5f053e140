//go:build !linux

package ext4lite

import "testing"

func noSpaceE2fsck(t *testing.T, img string) {}

func e2fsckAfterRecovery(t *testing.T, img []byte) {}
