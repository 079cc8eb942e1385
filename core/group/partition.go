package group

// PartitionFor is the __consumer_offsets partition that holds groupID, and
// whose leader is therefore the group's coordinator: Kafka's
// Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions, where
// hashCode is Java's String.hashCode over the UTF-16 code units of the id
// and Utils.abs maps math.MinInt32 to 0 (not to itself, as Math.abs would).
// Clients never compute it, but Kafka's tools and a mixed deployment agree
// on it only if it is exact. It panics if partitions is not positive: that
// is a configuration the caller validated.
func PartitionFor(groupID string, partitions int32) int32 {
	if partitions <= 0 {
		panic("group: PartitionFor needs a positive partition count")
	}
	return kafkaAbs(javaStringHash(groupID)) % partitions
}

// javaStringHash is java.lang.String.hashCode: s[0]*31^(n-1) + ... + s[n-1]
// in int32 arithmetic that wraps, over UTF-16 code units. A rune outside
// the Basic Multilingual Plane is two code units (a surrogate pair); a byte
// sequence that is not valid UTF-8 decodes to U+FFFD, as Java's decoder
// replaces malformed input when it builds the String from the wire.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// kafkaAbs is Kafka's Utils.abs.
func kafkaAbs(n int32) int32 {
	if n == -1<<31 {
		return 0
	}
	if n < 0 {
		return -n
	}
	return n
}
