// The CSR approver's referee: reads kubelet serving certificate requests as
// kube-apiserver and kube-controller-manager's kubelet-serving signer read
// them (encoding/pem, then crypto/x509.ParseCertificateRequest), so the
// approver's differential test can hold its reading against Go's own.
//
// One request per line on standard input, base64 of the raw spec.request
// bytes; one JSON object per line on standard output. Standard library only,
// so it builds offline.
package main

import (
	"bufio"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
)

type reading struct {
	OK     bool     `json:"ok"`
	Error  string   `json:"error,omitempty"`
	Signed bool     `json:"signed"`
	CN     string   `json:"cn"`
	O      []string `json:"o"`
	DNS    []string `json:"dns"`
	IPs    []string `json:"ips"`
	Emails []string `json:"emails"`
	URIs   []string `json:"uris"`
}

func read(raw []byte) reading {
	// k8s.io/kubernetes/pkg/apis/certificates.ParseCSR
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return reading{Error: "PEM block type must be CERTIFICATE REQUEST"}
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return reading{Error: err.Error()}
	}
	out := reading{
		OK:     true,
		Signed: csr.CheckSignature() == nil,
		CN:     csr.Subject.CommonName,
		O:      append([]string{}, csr.Subject.Organization...),
		DNS:    append([]string{}, csr.DNSNames...),
		Emails: append([]string{}, csr.EmailAddresses...),
		IPs:    []string{},
		URIs:   []string{},
	}
	for _, ip := range csr.IPAddresses {
		out.IPs = append(out.IPs, ip.String())
	}
	for _, uri := range csr.URIs {
		out.URIs = append(out.URIs, uri.String())
	}
	return out
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	for in.Scan() {
		raw, err := base64.StdEncoding.DecodeString(in.Text())
		var answer reading
		if err != nil {
			answer = reading{Error: fmt.Sprintf("referee: bad input line: %v", err)}
		} else {
			answer = read(raw)
		}
		if err := encoder.Encode(answer); err != nil {
			os.Exit(2)
		}
		if err := out.Flush(); err != nil {
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
