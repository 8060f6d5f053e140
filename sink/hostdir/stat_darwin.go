package hostdir

import (
	"io/fs"
	"syscall"
	"time"

	"z.gfire.dev/gvx/sink"
)

func sysStat(fi fs.FileInfo, h *sink.Header) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	h.UID, h.GID = st.Uid, st.Gid
	h.Ino, h.Nlink = st.Ino, uint32(st.Nlink)
	h.Atime = time.Unix(st.Atimespec.Unix())
	h.Ctime = time.Unix(st.Ctimespec.Unix())
	h.Crtime = time.Unix(st.Birthtimespec.Unix())
}
