// Package illtyped is a fixture for the purity test: it does not type-check,
// which the checker must report rather than skip.
package illtyped

// Wrong assigns a string to an int.
func Wrong() int {
	var n int = "not a number"
	return n
}
