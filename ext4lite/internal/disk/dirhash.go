package disk

import "math/bits"

// DirHash computes the htree hash of name (fs/ext4/hash.c, ext4fs_dirhash)
// for a hash version already adjusted for signedness (HashHalfMD4Unsigned
// etc.). It returns the major hash (bit 0 clear) and the minor hash.
// Siphash (casefolded directories) is not supported; ok is false then.
func DirHash(version uint8, name []byte, seed [4]uint32) (major, minor uint32, ok bool) {
	buf := [4]uint32{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476}
	if seed != [4]uint32{} {
		buf = seed
	}
	var hash uint32
	switch version {
	case HashLegacy, HashLegacyUnsigned:
		hash = dxHackHash(name, version == HashLegacy)
	case HashHalfMD4, HashHalfMD4Unsigned:
		signed := version == HashHalfMD4
		var in [8]uint32
		for p := name; ; p = p[32:] {
			str2hashbuf(p, in[:], signed)
			halfMD4Transform(&buf, &in)
			if len(p) <= 32 {
				break
			}
		}
		minor, hash = buf[2], buf[1]
	case HashTea, HashTeaUnsigned:
		signed := version == HashTea
		var in [8]uint32
		for p := name; ; p = p[16:] {
			str2hashbuf(p, in[:4], signed)
			teaTransform(&buf, in[:4])
			if len(p) <= 16 {
				break
			}
		}
		hash, minor = buf[0], buf[1]
	default:
		return 0, 0, false
	}
	hash &^= 1
	if hash == 0x7fffffff<<1 {
		hash = (0x7fffffff - 1) << 1
	}
	return hash, minor, true
}

// char converts a name byte as C's char would on the volume's platform.
func char(c byte, signed bool) uint32 {
	if signed {
		return uint32(int32(int8(c)))
	}
	return uint32(c)
}

func dxHackHash(name []byte, signed bool) uint32 {
	var hash uint32
	hash0, hash1 := uint32(0x12a3fe2d), uint32(0x37abe8f9)
	for _, c := range name {
		hash = hash1 + (hash0 ^ char(c, signed)*7152373)
		if hash&0x80000000 != 0 {
			hash -= 0x7fffffff
		}
		hash1, hash0 = hash0, hash
	}
	return hash0 << 1
}

// str2hashbuf packs up to 4*len(buf) bytes of msg into buf. An empty name
// still fills buf with padding, as the kernel's loop (which never runs for
// it) leaves buf's initial state; callers never hash empty names.
func str2hashbuf(msg []byte, buf []uint32, signed bool) {
	num := len(buf)
	n := len(msg)
	pad := uint32(n) | uint32(n)<<8
	pad |= pad << 16
	val := pad
	if n > num*4 {
		n = num * 4
	}
	j := 0
	for i := 0; i < n; i++ {
		val = char(msg[i], signed) + val<<8
		if i%4 == 3 {
			buf[j] = val
			j++
			val = pad
			num--
		}
	}
	num--
	if num >= 0 {
		buf[j] = val
		j++
	}
	for num--; num >= 0; num-- {
		buf[j] = pad
		j++
	}
}

func halfMD4Transform(buf *[4]uint32, in *[8]uint32) {
	const k2, k3 = 013240474631, 015666365641
	f := func(x, y, z uint32) uint32 { return z ^ (x & (y ^ z)) }
	g := func(x, y, z uint32) uint32 { return (x & y) + ((x ^ y) & z) }
	h := func(x, y, z uint32) uint32 { return x ^ y ^ z }
	a, b, c, d := buf[0], buf[1], buf[2], buf[3]
	r := func(fn func(x, y, z uint32) uint32, a *uint32, b, c, d, x uint32, s int) {
		*a = bits.RotateLeft32(*a+fn(b, c, d)+x, s)
	}
	r(f, &a, b, c, d, in[0], 3)
	r(f, &d, a, b, c, in[1], 7)
	r(f, &c, d, a, b, in[2], 11)
	r(f, &b, c, d, a, in[3], 19)
	r(f, &a, b, c, d, in[4], 3)
	r(f, &d, a, b, c, in[5], 7)
	r(f, &c, d, a, b, in[6], 11)
	r(f, &b, c, d, a, in[7], 19)

	r(g, &a, b, c, d, in[1]+k2, 3)
	r(g, &d, a, b, c, in[3]+k2, 5)
	r(g, &c, d, a, b, in[5]+k2, 9)
	r(g, &b, c, d, a, in[7]+k2, 13)
	r(g, &a, b, c, d, in[0]+k2, 3)
	r(g, &d, a, b, c, in[2]+k2, 5)
	r(g, &c, d, a, b, in[4]+k2, 9)
	r(g, &b, c, d, a, in[6]+k2, 13)

	r(h, &a, b, c, d, in[3]+k3, 3)
	r(h, &d, a, b, c, in[7]+k3, 9)
	r(h, &c, d, a, b, in[2]+k3, 11)
	r(h, &b, c, d, a, in[6]+k3, 15)
	r(h, &a, b, c, d, in[1]+k3, 3)
	r(h, &d, a, b, c, in[5]+k3, 9)
	r(h, &c, d, a, b, in[0]+k3, 11)
	r(h, &b, c, d, a, in[4]+k3, 15)

	buf[0] += a
	buf[1] += b
	buf[2] += c
	buf[3] += d
}

func teaTransform(buf *[4]uint32, in []uint32) {
	var sum uint32
	b0, b1 := buf[0], buf[1]
	a, b, c, d := in[0], in[1], in[2], in[3]
	for n := 0; n < 16; n++ {
		sum += 0x9E3779B9
		b0 += ((b1 << 4) + a) ^ (b1 + sum) ^ ((b1 >> 5) + b)
		b1 += ((b0 << 4) + c) ^ (b0 + sum) ^ ((b0 >> 5) + d)
	}
	buf[0] += b0
	buf[1] += b1
}
