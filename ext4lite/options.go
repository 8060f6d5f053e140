package ext4lite

import (
	"time"
)

// Options control opening and creating volumes. The zero value (or nil) is
// valid.
type Options struct {
	// ReadOnly opens without writing anything, not even the in-use mark.
	ReadOnly bool
	// Now returns the time used for changes that carry no time of their own
	// (directory mtimes when entries change, ctime). Default time.Now.
	Now func() time.Time
}

func (o *Options) orDefault() Options {
	var r Options
	if o != nil {
		r = *o
	}
	return r
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}
