package checkpoint

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"strand/sim/memdisk"
)

func TestOffsetsFormatRoundTrip(t *testing.T) {
	entries := []PartitionOffset{{"orders", 2, 17}, {"my-topic-with-dashes", 0, 5}, {"orders", 0, 9}}
	data := EncodeOffsets(entries)
	want := "0\n3\nmy-topic-with-dashes 0 5\norders 0 9\norders 2 17\n"
	if string(data) != want {
		t.Fatalf("encoded %q, want %q", data, want)
	}
	parsed, err := ParseOffsets(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]PartitionOffset{{"my-topic-with-dashes", 0, 5}, {"orders", 0, 9}, {"orders", 2, 17}}, parsed); diff != "" {
		t.Fatal(diff)
	}
}

func TestEpochsFormatRoundTrip(t *testing.T) {
	entries := []EpochEntry{{0, 0}, {3, 120}}
	data := EncodeEpochs(entries)
	if string(data) != "0\n2\n0 0\n3 120\n" {
		t.Fatalf("encoded %q", data)
	}
	parsed, err := ParseEpochs(data)
	if err != nil || !cmp.Equal(parsed, entries) {
		t.Fatalf("parsed %v, %v", parsed, err)
	}
	empty, err := ParseEpochs(EncodeEpochs(nil))
	if err != nil || len(empty) != 0 {
		t.Fatalf("empty: %v, %v", empty, err)
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	for _, bad := range []string{"", "1\n0\n", "0\n2\n1 0\n", "0\nx\n", "0\n1\n1 two\n", "0\n1\n1 2 3\n"} {
		if _, err := ParseEpochs([]byte(bad)); err == nil {
			t.Errorf("ParseEpochs(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"0\n1\ntopic 0\n", "0\n1\ntopic x 3\n", "0\n2\ntopic 0 1\n"} {
		if _, err := ParseOffsets([]byte(bad)); err == nil {
			t.Errorf("ParseOffsets(%q) accepted", bad)
		}
	}
}

func TestWriterSerializesAndCoalesces(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	w := NewWriter(disk, "", "cp")
	var order []string
	w.Write([]byte("first"), func(err error) { order = append(order, "first") })
	w.Write([]byte("second"), func(err error) { order = append(order, "second") })
	w.Write([]byte("third"), func(err error) { order = append(order, "third") })
	if w.Idle() {
		t.Fatal("writer idle with writes pending")
	}
	for disk.RunPending() > 0 {
	}
	data, err := disk.ReadFile("cp")
	if err != nil || string(data) != "third" {
		t.Fatalf("file holds %q (%v), want the newest content", data, err)
	}
	// "second" was coalesced into "third": both callbacks ran after it.
	if diff := cmp.Diff([]string{"first", "second", "third"}, order); diff != "" {
		t.Fatal(diff)
	}
	awaited := false
	w.Await(func(error) { awaited = true })
	if !awaited || !w.Idle() {
		t.Fatal("Await on an idle writer did not run at once")
	}
}

// A crash at any point of a write leaves either the old or the new content,
// never a mix, and the leftover temp file is removed on start-up.
func TestWriterAtomicUnderCrash(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		disk := memdisk.New(memdisk.Options{})
		w := NewWriter(disk, "", "cp")
		w.Write([]byte("old content"), nil)
		for disk.RunPending() > 0 {
		}
		w.Write([]byte("new content, longer"), nil)
		for steps := rng.IntN(4); steps > 0; steps-- {
			disk.RunPending()
		}
		disk.Crash(rng, memdisk.CrashMode(rng.IntN(3)))
		if err := RemoveTemps(disk, ""); err != nil {
			t.Fatal(err)
		}
		data, err := ReadFile(disk, "cp")
		if err != nil || (string(data) != "old content" && string(data) != "new content, longer") {
			t.Fatalf("seed %d: after a crash the checkpoint holds %q (%v)", seed, data, err)
		}
		names, _ := disk.List("")
		for _, name := range names {
			if strings.HasSuffix(name, TempSuffix) {
				t.Fatalf("seed %d: %s left behind", seed, name)
			}
		}
	}
}

func TestWriterFailureIsSticky(t *testing.T) {
	disk := memdisk.New(memdisk.Options{})
	if err := disk.MkdirAll("d"); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(disk, "d", "cp")
	w.Write([]byte("a"), nil)
	for disk.RunPending() > 0 {
	}
	if err := disk.FailNextSync("d"); err != nil {
		t.Fatal(err)
	}
	var first, second error
	w.Write([]byte("b"), func(err error) { first = err })
	for disk.RunPending() > 0 {
	}
	w.Write([]byte("c"), func(err error) { second = err })
	if first == nil || second == nil {
		t.Fatalf("a failed sync was not reported, or the writer retried: %v, %v", first, second)
	}
}
