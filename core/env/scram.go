package env

// ScramCredential is one user's SCRAM credential for one mechanism, as the
// metadata log keeps it (RFC 5802's server-side data, Kafka's
// ScramCredential): never the password. Its slices are never modified.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// ScramCredentials is the SCRAM credentials of the metadata a node has
// applied, as the core last handed them to its Network
// (Network.SetScramCredentials). It is an immutable value: it may be read
// on any goroutine, in parallel with the loop, which hands over a new one
// when a credential changes.
type ScramCredentials interface {
	// LookupScram returns user's credential for mechanism (the SASL name,
	// SCRAM-SHA-256 or SCRAM-SHA-512), and whether there is one.
	LookupScram(mechanism, user string) (ScramCredential, bool)
}
