package config

import (
	"math"
	"strconv"
	"strings"
)

// Value parsers. Each trims the value first, as Kafka's ConfigDef does, and
// reports a bad value as an *Error naming the key and quoting the value.

// parseInt64 parses a Kafka LONG in [min, max].
func parseInt64(key, value string, min, max int64) (int64, error) {
	trimmed := strings.TrimSpace(value)
	n, err := strconv.ParseInt(trimmed, 10, 64)
	if err != nil {
		if numErr, ok := err.(*strconv.NumError); ok && numErr.Err == strconv.ErrRange {
			return 0, valueError(key, value, "is out of range for a 64-bit integer")
		}
		return 0, valueError(key, value, "is not an integer")
	}
	if n < min || n > max {
		return 0, valueError(key, value, "is out of range: %s", rangeText(min, max))
	}
	return n, nil
}

// parseInt32 parses a Kafka INT in [min, max].
func parseInt32(key, value string, min, max int32) (int32, error) {
	trimmed := strings.TrimSpace(value)
	n, err := strconv.ParseInt(trimmed, 10, 32)
	if err != nil {
		if numErr, ok := err.(*strconv.NumError); ok && numErr.Err == strconv.ErrRange {
			return 0, valueError(key, value, "is out of range for a 32-bit integer")
		}
		return 0, valueError(key, value, "is not an integer")
	}
	if int32(n) < min || int32(n) > max {
		return 0, valueError(key, value, "is out of range: %s", rangeText(int64(min), int64(max)))
	}
	return int32(n), nil
}

// parseInt16 parses a Kafka SHORT in [min, max].
func parseInt16(key, value string, min, max int16) (int16, error) {
	n, err := parseInt32(key, value, minInt32, maxInt32)
	if err != nil {
		return 0, err
	}
	if n < math.MinInt16 || n > math.MaxInt16 {
		return 0, valueError(key, value, "is out of range for a 16-bit integer")
	}
	if int16(n) < min || int16(n) > max {
		return 0, valueError(key, value, "is out of range: %s", rangeText(int64(min), int64(max)))
	}
	return int16(n), nil
}

// rangeText describes [min, max] leaving out a bound that is the type's limit.
func rangeText(min, max int64) string {
	unboundedBelow := min == math.MinInt64 || min == math.MinInt32 || min == math.MinInt16
	unboundedAbove := max == math.MaxInt64 || max == math.MaxInt32 || max == math.MaxInt16
	switch {
	case unboundedBelow && unboundedAbove:
		return "any integer"
	case unboundedAbove:
		return "must be at least " + strconv.FormatInt(min, 10)
	case unboundedBelow:
		return "must be at most " + strconv.FormatInt(max, 10)
	default:
		return "must be between " + strconv.FormatInt(min, 10) + " and " + strconv.FormatInt(max, 10)
	}
}

// parseBool parses a Kafka BOOLEAN: true or false, in any case.
func parseBool(key, value string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, valueError(key, value, "is not a boolean: must be true or false")
}

// parseList parses a Kafka LIST: comma-separated, each item trimmed. An empty
// or all-blank value is the empty list; an empty item between commas is an
// error, because it is almost always a typo.
func parseList(key, value string) ([]string, error) {
	trimmed := strings.TrimSpace(value)
	if trimmed == "" {
		return nil, nil
	}
	items := strings.Split(trimmed, ",")
	for i, item := range items {
		items[i] = strings.TrimSpace(item)
		if items[i] == "" {
			return nil, valueError(key, value, "has an empty item in its comma-separated list")
		}
	}
	return items, nil
}

// parseChoice parses a Kafka STRING restricted to choices (compared
// case-sensitively, as Kafka's ValidString does).
func parseChoice(key, value string, choices ...string) (string, error) {
	trimmed := strings.TrimSpace(value)
	for _, c := range choices {
		if trimmed == c {
			return c, nil
		}
	}
	return "", valueError(key, value, "is not one of %s", strings.Join(choices, ", "))
}
