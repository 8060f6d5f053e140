package volume

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/context"
	"gvisor.dev/gvisor/pkg/lisafs"
)

// BenchmarkServe measures the server's side of the guest's file I/O over
// a real lisafs connection: one round trip that does next to nothing (a
// walk to a missing name), what one small file of an untar costs (the six
// RPCs the Sentry sends for it), a 1 MiB write (what dd bs=1M becomes),
// a 1 MiB read, and the fsync the Sentry sends per file on sync(2) when
// nothing changed. Profile with -cpuprofile; bench/volume.sh measures the
// whole episode.
func BenchmarkServe(b *testing.B) {
	b.Run("walk-enoent", func(b *testing.B) { // one round trip, next to no work: the RPC floor
		s := serve(b, 64<<20)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.root.Walk(ctx, "missing"); err != unix.ENOENT {
				b.Fatalf("walk: %v, want ENOENT", err)
			}
		}
	})
	b.Run("untar-file", func(b *testing.B) {
		s := serve(b, 2<<30)
		dirs := make([]lisafs.ClientFD, 100)
		for i := range dirs {
			dirs[i] = s.dir(b, fmt.Sprintf("d%d", i))
		}
		data := []byte("file 1234\n")
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			untarFile(b, s, dirs[i%len(dirs)], fmt.Sprintf("f%d", i), data)
		}
	})
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("write-%dKiB", size>>10), func(b *testing.B) {
			s := serve(b, 2<<30)
			ctx := context.Background()
			buf := make([]byte, size)
			var cfd, fd lisafs.ClientFD
			var off uint64
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if off == 0 || off >= 512<<20 { // a new file every 512 MiB, as dd of=FILE
					b.StopTimer()
					if fd.Ok() {
						fd.Close(ctx, true)
						cfd.Close(ctx, true)
						if err := s.root.UnlinkAt(ctx, "big", 0); err != nil {
							b.Fatal(err)
						}
					}
					in, ofd, _, err := s.root.OpenCreateAt(ctx, "big", unix.O_WRONLY, 0o644, 0, 0)
					if err != nil {
						b.Fatal(err)
					}
					cfd, fd, off = s.client.NewFD(in.ControlFD), s.client.NewFD(ofd), 0
					b.StartTimer()
				}
				if n, err := fd.Write(ctx, buf, off); err != nil || n != uint64(size) {
					b.Fatalf("write: %d, %v", n, err)
				}
				off += uint64(size)
			}
		})
	}
	b.Run("read-1024KiB", func(b *testing.B) {
		s := serve(b, 1<<30)
		ctx := context.Background()
		const fileSize = 64 << 20
		in, ofd, _, err := s.root.OpenCreateAt(ctx, "big", unix.O_RDWR, 0o644, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		fd := s.client.NewFD(ofd)
		buf := make([]byte, 1<<20)
		for off := uint64(0); off < fileSize; off += uint64(len(buf)) {
			if _, err := fd.Write(ctx, buf, off); err != nil {
				b.Fatal(err)
			}
		}
		_ = in
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			off := uint64(i) * uint64(len(buf)) % fileSize
			if n, err := fd.Read(ctx, buf, off); err != nil || n != uint64(len(buf)) {
				b.Fatalf("read: %d, %v", n, err)
			}
		}
	})
	b.Run("fsync-clean", func(b *testing.B) {
		s := serve(b, 1<<30)
		ctx := context.Background()
		_, ofd, _, err := s.root.OpenCreateAt(ctx, "f", unix.O_WRONLY, 0o644, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		fd := s.client.NewFD(ofd)
		if _, err := fd.Write(ctx, []byte("x"), 0); err != nil {
			b.Fatal(err)
		}
		if err := fd.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := fd.Sync(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
