package diskio

import (
	"testing"

	"strand/core/env"
)

// A failed Open returns a nil env.File, not a nil *File inside one: the
// checkpoint writer closes what Open returned when it is not nil, and a
// produce arriving while the node shut down crashed it that way.
func TestFailedOpenReturnsNilInterface(t *testing.T) {
	d, _ := newTestDisk(t)
	if f, err := d.Open("missing", env.OpenOptions{}); err == nil || f != nil {
		t.Fatalf("open missing: file %#v, error %v; want a nil file and an error", f, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if f, err := d.Open("after-close", env.OpenOptions{Create: true}); err == nil || f != nil {
		t.Fatalf("open on a closed disk: file %#v, error %v; want a nil file and an error", f, err)
	}
}
