package producer

import "testing"

func TestIDBlock(t *testing.T) {
	var b IDBlock
	if _, ok := b.Next(); ok {
		t.Fatal("an id without a block")
	}
	if !b.ShouldRequest(0) {
		t.Fatal("no request without a block")
	}
	b.RequestStarted()
	if b.ShouldRequest(0) {
		t.Fatal("a second request while one is in flight")
	}
	b.RequestFailed(100)
	if b.ShouldRequest(100+IDBlockRetryBackoffMs-1) || !b.ShouldRequest(100+IDBlockRetryBackoffMs) {
		t.Fatal("retry backoff not kept")
	}
	b.RequestStarted()
	if err := b.AddBlock(1000, 10, 200); err != nil {
		t.Fatal(err)
	}
	for want := int64(1000); want < 1009; want++ {
		if b.ShouldRequest(200) {
			t.Fatalf("prefetch before 90%% of the block was used (next id %d)", want)
		}
		if id, ok := b.Next(); !ok || id != want {
			t.Fatalf("id %d, %v; want %d", id, ok, want)
		}
	}
	if !b.ShouldRequest(200) {
		t.Fatal("no prefetch at 90% used")
	}
	b.RequestStarted()
	if err := b.AddBlock(1005, 10, 200); err == nil {
		t.Fatal("a block overlapping ids already handed out was accepted")
	}
	b.RequestStarted()
	if err := b.AddBlock(5000, 10, 300); err != nil {
		t.Fatal(err)
	}
	if b.ShouldRequest(300) {
		t.Fatal("a request while the next block waits")
	}
	for _, want := range []int64{1009, 5000, 5001} {
		if id, ok := b.Next(); !ok || id != want {
			t.Fatalf("id %d, %v; want %d", id, ok, want)
		}
	}
	if err := b.AddBlock(9000, 0, 300); err == nil {
		t.Fatal("an empty block was accepted")
	}
}
