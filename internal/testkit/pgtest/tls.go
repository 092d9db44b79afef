package pgtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnableTLS turns on TLS for the cluster with a server certificate for
// localhost and 127.0.0.1, signed by a certificate authority of the
// test's own (as Supabase's servers are signed by Supabase's own root CA,
// which no system trusts). It returns the path of that CA's certificate:
// the file a client's sslrootcert names. Plain connections keep working.
func (c *Cluster) EnableTLS(t testing.TB) (caFile string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	caCert, caKey := newCert(t, nil, nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "engagement test root CA"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
	})
	srvCert, srvKey := newCert(t, caCert, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})

	caFile = filepath.Join(t.TempDir(), "root-ca.crt")
	writePEM(t, caFile, "CERTIFICATE", caCert.Raw, 0o644)
	// The server reads its key only if the key belongs to it and no one
	// else may read it.
	certFile, keyFile := filepath.Join(c.dir, "server.crt"), filepath.Join(c.dir, "server.key")
	writePEM(t, certFile, "CERTIFICATE", srvCert.Raw, 0o644)
	der, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "EC PRIVATE KEY", der, 0o600)
	owner, err := clusterOwner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if owner != nil {
		for _, f := range []string{certFile, keyFile} {
			if err := os.Chown(f, owner.uid, owner.gid); err != nil {
				t.Fatal(err)
			}
		}
	}

	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, stmt := range []string{
		`ALTER SYSTEM SET ssl_cert_file = '` + certFile + `'`,
		`ALTER SYSTEM SET ssl_key_file = '` + keyFile + `'`,
		`ALTER SYSTEM SET ssl = on`,
		`SELECT pg_reload_conf()`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("enable TLS on the test's cluster: %s: %v", stmt, err)
		}
	}
	// The reload is asynchronous: wait until a new session sees it.
	for {
		probe, err := pgx.Connect(ctx, c.URL)
		if err != nil {
			t.Fatal(err)
		}
		on, err := value[string](ctx, probe, `SHOW ssl`)
		probe.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if on == "on" {
			return caFile
		}
		select {
		case <-ctx.Done():
			t.Fatal("TLS is still off a minute after the reload")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// newCert makes a certificate from tmpl with a fresh P-256 key, signed by
// parent (self-signed when parent is nil).
func newCert(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func writePEM(t testing.TB, path, kind string, der []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), perm); err != nil {
		t.Fatal(err)
	}
}
