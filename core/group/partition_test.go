package group

import (
	"testing"
	"unicode/utf16"

	"pgregory.net/rapid"
)

// TestPartitionForKnownValues pins PartitionFor to values worked out by
// hand from Java's String.hashCode (s[0]*31^(n-1) + ... + s[n-1], int32):
//
//	""    -> 0                              -> 0
//	"a"   -> 97                             -> 97 % 50 = 47
//	"ab"  -> 97*31 + 98 = 3105              -> 3105 % 50 = 5
//	"abc" -> 3105*31 + 99 = 96354           -> 96354 % 50 = 4
//	"😀"  -> UTF-16 D83D DE00: 55357*31 + 56832 = 1772899 -> % 50 = 49
//	"polygenelubricants" -> -2147483648 (the well-known Integer.MIN_VALUE
//	        hash); Utils.abs maps it to 0, so partition 0 for any count,
//	        where Math.abs would have given a negative partition.
func TestPartitionForKnownValues(t *testing.T) {
	cases := []struct {
		group string
		hash  int32
		want  int32
	}{
		{"", 0, 0},
		{"a", 97, 47},
		{"ab", 3105, 5},
		{"abc", 96354, 4},
		{"😀", 1772899, 49},
		{"polygenelubricants", -2147483648, 0},
	}
	for _, c := range cases {
		if got := javaStringHash(c.group); got != c.hash {
			t.Errorf("hash(%q) = %d, want %d", c.group, got, c.hash)
		}
		if got := PartitionFor(c.group, 50); got != c.want {
			t.Errorf("PartitionFor(%q, 50) = %d, want %d", c.group, got, c.want)
		}
	}
	if got := PartitionFor("polygenelubricants", 7); got != 0 {
		t.Errorf("PartitionFor(polygenelubricants, 7) = %d, want 0", got)
	}
}

// TestPartitionForMatchesUTF16Definition checks the hash against a second,
// independent computation: encode to UTF-16 with the standard library and
// fold in uint32 arithmetic, then apply Utils.abs and the modulo.
func TestPartitionForMatchesUTF16Definition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "group")
		n := rapid.Int32Range(1, 1000).Draw(t, "partitions")
		var h uint32
		for _, u := range utf16.Encode([]rune(s)) {
			h = 31*h + uint32(u)
		}
		signed := int64(int32(h))
		if signed < 0 {
			signed = -signed
		}
		if signed == 1<<31 {
			signed = 0
		}
		want := int32(signed % int64(n))
		if got := PartitionFor(s, n); got != want || got < 0 || got >= n {
			t.Fatalf("PartitionFor(%q, %d) = %d, want %d", s, n, got, want)
		}
	})
}
