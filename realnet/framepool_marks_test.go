package realnet

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"strand/core/env"
	"strand/diskio"
)

// TestRecycledFramesWaitForDiskioAcrossDisks drives the frame pool's release
// and reclaim against real diskio Disks, as two nodes of one process share
// produceFrames: two goroutines, each the only caller of its own Disk as an
// event loop is, append every frame they get from one pool and release it
// at once, while a third Disk (another log directory) stays idle. Recycled
// frames are poisoned, so a frame handed out again while its append was
// still queued would put 0xdb bytes in a file: each file must hold exactly
// the bytes appended. Every parked frame must come back once the appends
// are written, the idle Disk notwithstanding.
func TestRecycledFramesWaitForDiskioAcrossDisks(t *testing.T) {
	if !poisonRecycledFrames {
		t.Fatal("realnet tests run with poisoned frames (framepool_test.go)")
	}
	openDisk := func() *diskio.Disk {
		d, err := diskio.New(t.TempDir(), diskio.Options{Post: func(fn func()) { go fn() }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close(); d.Wait() })
		return d
	}
	idle := openDisk()
	idleFile, err := idle.Open("idle.log", env.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer idleFile.Close()

	var pool framePool
	const frames = 1500
	const loops = 2
	expected := make([][]byte, loops)
	files := make([]*diskio.File, loops)
	parkedMax := make([]int, loops)
	var wg sync.WaitGroup
	for k := range loops {
		f, err := openDisk().OpenFile("seg.log", env.OpenOptions{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[k] = f
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(k), 2))
			for i := range frames {
				fb := pool.get(1 + rng.IntN(40<<10))
				for j := range fb.buf {
					fb.buf[j] = byte((k*31 + i*17 + j) % 211) // never framePoisonByte
				}
				expected[k] = append(expected[k], fb.buf...)
				if err := f.Append(fb.buf); err != nil {
					t.Errorf("loop %d: append %d: %v", k, i, err)
					return
				}
				pool.release(fb)
				pool.mu.Lock()
				parkedMax[k] = max(parkedMax[k], len(pool.pending))
				pool.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for k, f := range files {
		if err := f.WaitWritten(int64(len(expected[k]))); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(expected[k]))
		if _, err := f.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, expected[k]) {
			at := 0
			for got[at] == expected[k][at] {
				at++
			}
			t.Errorf("loop %d: the file differs from the bytes appended from byte %d of %d (0x%02x): a frame was recycled before diskio wrote it", k, at, len(got), got[at])
		}
	}
	pool.reclaim()
	if n := len(pool.pending); n != 0 {
		t.Errorf("%d frames still parked after every append was written", n)
	}
	if pool.recycled.Load() == 0 || max(parkedMax[0], parkedMax[1]) == 0 {
		t.Errorf("%d frames recycled, at most %d parked: the test did not exercise parking", pool.recycled.Load(), max(parkedMax[0], parkedMax[1]))
	}
}

// TestRecycledProduceFramesWithLogDirsIdle produces with acks=all to a
// broker with three log directories, one diskio Disk each, of which the
// topic's two partitions leave at least one without data, while Produce
// frames are recycled and poisoned, and consumes every record back
// identical. Append marks are process-wide: a Disk with nothing queued must
// neither hold recycling back nor let a frame go while another Disk still
// queues its batches.
func TestRecycledProduceFramesWithLogDirsIdle(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	c := startCluster(t, 1, map[string]string{"log.dirs": strings.Join(dirs, ",")})
	defer c.stop()
	recycledBefore := produceFrames.recycled.Load()
	const topic = "recycled-log-dirs"
	c.createTopic(topic, 2, 1)
	idle := 0
	for _, dir := range dirs {
		held, err := filepath.Glob(filepath.Join(dir, topic+"-*"))
		if err != nil {
			t.Fatal(err)
		}
		if len(held) == 0 {
			idle++
		}
	}
	t.Logf("%d of the %d log dirs hold no partition of %s", idle, len(dirs), topic)
	if idle == 0 {
		t.Fatalf("every one of the %d log dirs holds a partition of the 2-partition topic", len(dirs))
	}
	roundTripKeyed(t, c, topic, kgo.AllISRAcks())
	if produceFrames.recycled.Load() == recycledBefore {
		t.Fatal("no Produce frame was recycled")
	}
}
