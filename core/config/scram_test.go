package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestScramListenerSecurityResolves: a broker listener serving both SCRAM
// mechanisms, nodes connecting with one of them, takes ScramLoginModule's
// username and password for that one; without them the configuration
// parses but realnet's completeness check names the key.
func TestScramListenerSecurityResolves(t *testing.T) {
	props := securedProps(map[string]string{
		"listener.name.client.sasl.enabled.mechanisms":        "SCRAM-SHA-256,SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol":                "SCRAM-SHA-512",
		"listener.name.client.scram-sha-512.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
		"listener.name.client.scram-sha-256.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required;`,
	})
	b, _, err := FromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	sasl := b.Security.Listeners["CLIENT"].SASL
	if got := sasl.Scram[MechanismScramSHA512]; got == nil || got.Username != "broker" || got.Password != "broker-secret" {
		t.Fatalf("SCRAM-SHA-512 settings %+v", got)
	}
	if got := sasl.Scram[MechanismScramSHA256]; got == nil || got.Username != "" {
		t.Fatalf("SCRAM-SHA-256 settings %+v", got)
	}
	if err := b.CheckAuthenticationComplete(); err != nil {
		t.Fatalf("complete configuration refused: %v", err)
	}

	props["listener.name.client.scram-sha-512.sasl.jaas.config"] = `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker";`
	b, _, err = FromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	err = b.CheckAuthenticationComplete()
	if err == nil || !strings.Contains(err.Error(), "listener.name.client.scram-sha-512.sasl.jaas.config") || !strings.Contains(err.Error(), "username and password") {
		t.Fatalf("a connecting node without a SCRAM password: %v", err)
	}
}

// TestScramTLSExampleParses: the README's SCRAM-over-TLS example
// (config/examples/scram-tls) parses without a warning: clients and
// replication on SASL_SSL with both SCRAM mechanisms, the nodes logging in
// as broker, the controller listener SSL with required client
// certificates that map the nodes' CN=node<n> to the member broker.
func TestScramTLSExampleParses(t *testing.T) {
	for n := 1; n <= 3; n++ {
		text, err := os.ReadFile(filepath.Join("..", "..", "config", "examples", "scram-tls", fmt.Sprintf("node%d.properties", n)))
		if err != nil {
			t.Fatal(err)
		}
		b, warnings, err := Parse(text, nil)
		if err != nil || len(warnings) != 0 {
			t.Fatalf("node%d.properties: %v %v", n, err, warnings)
		}
		if err := b.CheckAuthenticationComplete(); err != nil {
			t.Fatalf("node%d.properties: %v", n, err)
		}
		client, controller := b.Security.Listeners["CLIENT"], b.Security.Listeners["CONTROLLER"]
		if client.Protocol != SecurityProtocolSASLSSL || !slices.Equal(client.SASL.Mechanisms, []string{MechanismScramSHA256, MechanismScramSHA512}) ||
			b.Security.InterBrokerMechanism != MechanismScramSHA512 || client.SASL.Scram[MechanismScramSHA512].Username != "broker" {
			t.Fatalf("node%d CLIENT: %+v, inter-broker %s", n, client, b.Security.InterBrokerMechanism)
		}
		if controller.Protocol != SecurityProtocolSSL || controller.TLS.ClientAuth != "required" {
			t.Fatalf("node%d CONTROLLER: %+v", n, controller)
		}
		if got, err := controller.TLS.PrincipalRules.Map(fmt.Sprintf("CN=node%d", n)); err != nil || got != "broker" || !b.IsSuperUser("User:"+got) {
			t.Fatalf("node%d: CN=node%d maps to %q (%v)", n, n, got, err)
		}
		if got, _ := controller.TLS.PrincipalRules.Map("CN=mallory"); got == "broker" {
			t.Fatal("CN=mallory maps to broker")
		}
	}
}
