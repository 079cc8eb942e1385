package cluster

import (
	"slices"
	"sync"

	"strand/models"
)

// Hunt is the outcome of running one planted bug over seeds until its
// checker catches it.
type Hunt struct {
	Bug, Shape string
	// Checker is the check that must catch the bug (PlantedBug.Checker).
	Checker string
	// CaughtSeed is the first seed whose run with the bug found a
	// violation of Checker, when the same seed without the bug finds
	// none: 0 if none did.
	CaughtSeed uint64
	// SeedsRun counts the seeds tried with the bug.
	SeedsRun int
	// Caught is the catching run; Masked counts seeds where the bug run
	// failed but so did the run without it (an unplanted failure, which
	// says nothing about the bug).
	Caught Result
	Masked int
	// OtherSeeds count seeds where only other checkers caught the bug,
	// and Other is the first such run.
	OtherSeeds int
	Other      Result
	// SimNs and Events total every run made, baselines included.
	SimNs  int64
	Events uint64
}

// HuntBug runs bug over seeds 1..seedsMax (parallel at a time, each seed
// on its own goroutine and scheduler) until a seed catches it with its
// checker. A seed catches the bug when its run finds a violation of
// PlantedBug.Checker and the same seed with no bug finds none: otherwise
// the failure is not the bug's doing.
func HuntBug(bug, shape string, seedsMax, parallel int) Hunt {
	pb, _ := PlantedBugFor(bug)
	h := Hunt{Bug: bug, Shape: shape, Checker: pb.Checker}
	parallel = max(parallel, 1)
	for first := 1; first <= seedsMax && h.CaughtSeed == 0; first += parallel {
		n := min(parallel, seedsMax-first+1)
		type pair struct{ withBug, without Result }
		pairs := make([]pair, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				seed := uint64(first + i)
				pairs[i].withBug = Run(Options{Seed: seed, Shape: shape, Bug: bug, DiscardLogs: true})
				if len(pairs[i].withBug.Violations) > 0 {
					pairs[i].without = Run(Options{Seed: seed, Shape: shape, DiscardLogs: true})
				}
			}(i)
		}
		wg.Wait()
		for _, p := range pairs {
			h.SeedsRun++
			h.SimNs += p.withBug.SimNs + p.without.SimNs
			h.Events += p.withBug.Events + p.without.Events
			if len(p.withBug.Violations) == 0 {
				continue
			}
			if len(p.without.Violations) > 0 {
				h.Masked++
				continue
			}
			if !hasCheck(p.withBug.Violations, h.Checker) {
				if h.OtherSeeds == 0 {
					h.Other = p.withBug
				}
				h.OtherSeeds++
				continue
			}
			h.CaughtSeed, h.Caught = p.withBug.Seed, p.withBug
			break
		}
	}
	return h
}

func hasCheck(vs []models.Violation, check string) bool {
	for _, v := range vs {
		if v.Check == check {
			return true
		}
	}
	return false
}

// Checks lists the distinct checks among vs, in order of appearance.
func Checks(vs []models.Violation) []string {
	var out []string
	for _, v := range vs {
		if !slices.Contains(out, v.Check) {
			out = append(out, v.Check)
		}
	}
	return out
}

// PlantedBugShape is the shape a planted bug is hunted in (PlantedBugs),
// "mixed" for a name it does not know.
func PlantedBugShape(bug string) string {
	if b, ok := PlantedBugFor(bug); ok {
		return b.Shape
	}
	return "mixed"
}
