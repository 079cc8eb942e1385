package config

import "fmt"

// Error is an invalid configuration value or combination. Key names the
// setting at fault, so that an operator knows which line to fix and so that
// CreateTopics and AlterConfigs can answer INVALID_CONFIG naming it.
type Error struct {
	// Key is the configuration key at fault.
	Key string
	// Detail says what is wrong; it quotes the offending value when there is
	// one.
	Detail string
}

// Error formats the error as "config key <key>: <detail>".
func (e *Error) Error() string { return "config key " + e.Key + ": " + e.Detail }

// valueError builds an *Error quoting value.
func valueError(key, value, format string, args ...any) *Error {
	return &Error{Key: key, Detail: fmt.Sprintf("%q ", value) + fmt.Sprintf(format, args...)}
}

// keyError builds an *Error about a key as a whole.
func keyError(key, format string, args ...any) *Error {
	return &Error{Key: key, Detail: fmt.Sprintf(format, args...)}
}

// Warning is something an operator should see at start-up that does not stop
// the node: above all, a key Strand does not implement.
type Warning struct {
	// Key is the configuration key the warning is about.
	Key string
	// Message explains it.
	Message string
}

// String formats the warning for a log line.
func (w Warning) String() string { return w.Key + ": " + w.Message }

// Warnings are sorted by Key, then Message, so that start-up logs are stable.
type Warnings []Warning

// Keys returns the keys warned about, in order.
func (ws Warnings) Keys() []string {
	keys := make([]string, len(ws))
	for i, w := range ws {
		keys[i] = w.Key
	}
	return keys
}
