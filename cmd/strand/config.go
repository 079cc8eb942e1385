package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"strand/core/config"
)

// overrideFlags collects repeated --override key=value flags.
type overrideFlags map[string]string

// String shows the overrides (flag.Value).
func (o overrideFlags) String() string { return fmt.Sprint(map[string]string(o)) }

// Set adds one key=value (flag.Value).
func (o overrideFlags) Set(kv string) error {
	key, value, ok := strings.Cut(kv, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return fmt.Errorf("override %q: want key=value", kv)
	}
	o[key] = value
	return nil
}

// loadConfig reads the properties file at path (the embedded single-node
// defaults when path is empty), applies overrides and validates. Warnings
// come back even with an error, so that the caller can log a misspelt key
// next to the error it caused.
func loadConfig(path string, overrides map[string]string) (config.Broker, config.Warnings, error) {
	text := []byte(config.DefaultProperties)
	if path != "" {
		var err error
		if text, err = os.ReadFile(path); err != nil {
			return config.Broker{}, nil, fmt.Errorf("reading config: %w", err)
		}
	}
	b, warnings, err := config.Parse(text, overrides)
	if err != nil {
		source := path
		if source == "" {
			source = "embedded defaults"
		}
		return config.Broker{}, warnings, fmt.Errorf("%s: %w", source, err)
	}
	return b, warnings, nil
}

// logWarnings logs each configuration warning by key name, so that an
// operator sees every Kafka key Strand ignores (CLARIFICATIONS.md,
// "Listeners").
func logWarnings(logger *slog.Logger, warnings config.Warnings) {
	for _, w := range warnings {
		logger.Warn("config warning", "key", w.Key, "detail", w.Message)
	}
}
