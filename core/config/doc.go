// Package config reads a Strand node's configuration: Kafka's server.properties
// keys with Kafka's defaults (Broker), per-topic settings layered over the
// broker's (TopicConfig), and the meta.properties file that gives each log
// directory its identity (Meta).
//
// Everything here is a pure function of its inputs. The package must not read
// files, the clock or randomness: cmd/ reads the properties file and passes
// its bytes in, and cluster-id generation takes its random bytes as an
// argument. It lives under core/ so that the simulator and the real broker
// share one definition of every key.
//
// Where Strand differs from Kafka (a stricter range, a finite default for a
// memory limit, a key Kafka does not have), the key's entry in keys.go says
// so. Kafka keys that Strand does not implement are not errors: Parse returns
// them as Warnings, which the binary logs by name at start-up
// (CLARIFICATIONS.md, "Listeners"), except security keys, which fail
// closed: an unimplemented one refuses the start (security.go, SPEC.md §10).
package config
