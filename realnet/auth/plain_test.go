package auth

import (
	"bytes"
	"errors"
	"testing"
)

func TestPlainExchange(t *testing.T) {
	m := NewPlain(StaticUsers(map[string]string{"alice": "secret"}))
	cases := []struct {
		msg     []byte
		ok      bool
		message string
	}{
		{AppendPlainMessage(nil, "alice", "secret"), true, ""},
		{[]byte("alice\x00alice\x00secret"), true, ""},
		{AppendPlainMessage(nil, "alice", "wrong"), false, plainBadCredentials},
		{AppendPlainMessage(nil, "bob", "secret"), false, plainBadCredentials},
		{AppendPlainMessage(nil, "", "secret"), false, plainNoUsername},
		{AppendPlainMessage(nil, "alice", ""), false, plainNoPassword},
		{[]byte("bob\x00alice\x00secret"), false, plainOtherAuthzID},
		{[]byte("alice\x00secret"), false, "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"},
	}
	for _, c := range cases {
		ex := m.Start(nil)
		answer, done, err := ex.Next(c.msg)
		if c.ok {
			if err != nil || !done || answer == nil || len(answer) != 0 || ex.Result().Principal != "User:alice" {
				t.Errorf("%q: answer %v done %v err %v principal %q", c.msg, answer, done, err, ex.Result().Principal)
			}
			continue
		}
		var f *Failure
		if !errors.As(err, &f) || f.Message != c.message || done {
			t.Errorf("%q: got %v, want failure %q", c.msg, err, c.message)
		}
	}
}

func FuzzParsePlainMessage(f *testing.F) {
	f.Add([]byte("\x00alice\x00secret"))
	f.Add([]byte("a\x00b\x00c\x00d"))
	f.Add([]byte{0xff, 0, 0})
	m := NewPlain(StaticUsers(map[string]string{"alice": "secret"}))
	f.Fuzz(func(t *testing.T, msg []byte) {
		p, err := ParsePlainMessage(msg)
		if err == nil {
			// Fields hold no NUL and rebuild the message.
			joined := bytes.Join([][]byte{[]byte(p.AuthzID), []byte(p.User), []byte(p.Password)}, []byte{0})
			if !bytes.Equal(joined, msg) {
				t.Fatalf("fields %q do not rebuild %q", p, msg)
			}
		}
		ex := m.Start(nil)
		_, done, err := ex.Next(msg)
		if done != (err == nil) {
			t.Fatalf("done %v with err %v", done, err)
		}
		if done && ex.Result().Principal != "User:alice" {
			t.Fatalf("authenticated as %q from %q", ex.Result().Principal, msg)
		}
	})
}
