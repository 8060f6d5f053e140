package units

import "testing"

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"8G", 8 << 30, true},
		{"4g", 4 << 30, true},
		{"512M", 512 << 20, true},
		{"512MiB", 512 << 20, true},
		{"1T", 1 << 40, true},
		{"4096", 4096, true},
		{"1.5G", 3 << 29, true},
		{"", 0, false},
		{"abc", 0, false},
		{"-1G", 0, false},
	} {
		got, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
