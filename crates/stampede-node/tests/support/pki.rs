//! A test PKI made at run time with `rcgen`: a CA, a node certificate (127.0.0.1 and localhost)
//! and a client certificate signed by it, and another CA that signed nothing here.

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use stampede::ClientTls;
use stampede_node::TlsOptions;

/// A test CA, a certificate for the node (127.0.0.1 and localhost) and one for a client, both
/// signed by it, and another CA that signed nothing here — as PEM files in a directory.
pub struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    pub fn new() -> Pki {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (ca, ca_key) = authority("Stampede test CA");
        let (other_ca, _) = authority("Another CA");
        let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).expect("writes a PEM file");
        write("ca.pem", ca.pem());
        write("other-ca.pem", other_ca.pem());
        for (name, names) in [("node", vec!["127.0.0.1".to_owned(), "localhost".to_owned()]), ("client", vec![])] {
            let mut params = CertificateParams::new(names).expect("certificate parameters");
            params.distinguished_name.push(DnType::CommonName, format!("stampede test {name}"));
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
            let key = KeyPair::generate().expect("a key pair");
            let cert = params.signed_by(&key, &ca, &ca_key).expect("the CA signs");
            write(&format!("{name}.pem"), cert.pem());
            write(&format!("{name}.key"), key.serialize_pem());
        }
        Pki { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The node's TLS options, `mutual` or not.
    pub fn node(&self, mutual: bool) -> TlsOptions {
        TlsOptions {
            certificate: self.path("node.pem"),
            private_key: self.path("node.key"),
            root_ca: Some(self.path("ca.pem")),
            mutual,
            mesh_node_cn: Vec::new(),
        }
    }

    /// A client's TLS files: trusting `ca`, with the client certificate or not.
    pub fn client(&self, ca: &str, with_certificate: bool) -> ClientTls {
        ClientTls {
            root_ca: Some(self.path(ca)),
            certificate: with_certificate.then(|| self.path("client.pem")),
            private_key: with_certificate.then(|| self.path("client.key")),
        }
    }
}

/// A self-signed CA certificate and its key.
fn authority(name: &str) -> (Certificate, KeyPair) {
    let mut params = CertificateParams::new(Vec::new()).expect("CA parameters");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().expect("a key pair");
    (params.self_signed(&key).expect("the CA signs itself"), key)
}
