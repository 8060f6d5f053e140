package volume

import "gvisor.dev/gvisor/pkg/marshal/primitive"

func primitiveU64(v uint64) primitive.Uint64 { return primitive.Uint64(v) }
func primitiveU8(v uint8) primitive.Uint8    { return primitive.Uint8(v) }
