package controller

import (
	"slices"

	"strand/core/metadata"
)

// placementCursor is where the next placement starts on the ring of usable
// brokers: the number of partitions whose preferred leader (first replica)
// is usable. While the usable brokers and the replication factor stay the
// same, it equals the number of partitions placed so far, so every topic
// continues the stripe where the previous one stopped.
func placementCursor(im *metadata.Image, usable []int32) int {
	cursor := 0
	im.EachPartition(func(_ metadata.TopicPartition, s metadata.PartitionState) {
		if slices.Contains(usable, s.Replicas[0]) {
			cursor++
		}
	})
	return cursor
}

// placeReplicas assigns count new partitions of replication factor rf to
// the usable brokers (a ring sorted by id), deterministically. Replica slots
// are dealt round the ring like cards: partition number g (counting from
// cursor) takes the rf consecutive slots from g*rf, so replica counts per
// broker never differ by more than one. Its preferred leader is the replica
// at offset j = (g / (n/d)) mod d of its set, where d = gcd(n, rf): the
// starts g*rf mod n run through the multiples of d once every n/d
// partitions, and moving j on each round makes leaderships run through
// every broker too, so preferred-leader counts never differ by more than one
// either. Both hold across topics as long as the usable brokers and the
// replication factor stay the same (cursor counts the partitions placed so
// far). rf must be in [1, len(usable)].
//
// Kafka's StripedReplicaPlacer starts at a random broker and balances each
// topic on its own; this placement has no randomness to draw from, and
// balances the whole cluster.
func placeReplicas(usable []int32, cursor, count, rf int) [][]int32 {
	if rf < 1 || rf > len(usable) || cursor < 0 {
		panic("controller: placeReplicas called with an impossible replication factor or cursor")
	}
	ring := slices.Clone(usable)
	slices.Sort(ring)
	n := len(ring)
	d := gcd(n, rf)
	out := make([][]int32, 0, count)
	for p := range count {
		g := cursor + p
		set := make([]int32, rf)
		for i := range set {
			set[i] = ring[(g*rf+i)%n]
		}
		leader := set[(g/(n/d))%d]
		out = append(out, append([]int32{leader}, without(set, leader)...))
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// usableBrokers are the brokers new replicas may be placed on: registered,
// unfenced, not shutting down. Sorted.
func (c *Controller) usableBrokers() []int32 {
	var out []int32
	for _, id := range c.latest.BrokerIDs() {
		if c.acceptable(id) {
			out = append(out, id)
		}
	}
	return out
}
