// Package specdoc holds the tests that keep SPEC.md a contract: every test
// it cites as a check exists, and it tells no history (no commit hashes, no
// work sessions, no reviews). It has no code of its own.
package specdoc
