//! The TLS flags (see `docs/SECURITY.md`): `stampede serve`'s certificate, private key, root CA
//! and `--tls-mutual`; a client command's root CA and, for a node in mutual mode, its own
//! certificate and key; a client command's `--user` (its password from `STAMPEDE_PASSWORD`). The
//! library checks the files (`InvalidArgument` naming one that is
//! missing or not PEM); clap checks which flags go together.

use std::path::PathBuf;
use std::time::Duration;

use stampede::{ClientTls, ConnectOptions};
use stampede_node::TlsOptions;

/// `stampede serve`'s TLS flags, for its `tls/<host>:<port>` and `quic/<host>:<port>` endpoints.
#[derive(clap::Args, Clone, Debug)]
pub struct ServeTls {
    /// The node's certificate (PEM), presented on its tls/ endpoints; it must name the host
    /// clients connect to (IP address or DNS name).
    #[arg(long, value_name = "PEM", requires = "tls_private_key")]
    pub tls_certificate: Option<PathBuf>,
    /// The private key (PEM) of --tls-certificate.
    #[arg(long, value_name = "PEM", requires = "tls_certificate")]
    pub tls_private_key: Option<PathBuf>,
    /// The CA certificate (PEM) trusted for client certificates (--tls-mutual) and for the nodes
    /// given with --connect tls/...
    #[arg(long, value_name = "PEM", requires = "tls_certificate")]
    pub tls_root_ca: Option<PathBuf>,
    /// Require clients to present a certificate signed by --tls-root-ca.
    #[arg(long, requires_all = ["tls_certificate", "tls_root_ca"])]
    pub tls_mutual: bool,
    /// The common name of the mesh's node certificates (repeatable): only links presenting one
    /// may use the distributed ts_min's keys; clients, whose certificates bear other names, are
    /// refused them by zenoh's access control. Needs --tls-mutual; every link between nodes must
    /// then be mutual TLS.
    #[arg(long, value_name = "CN", requires = "tls_mutual")]
    pub mesh_node_cn: Vec<String>,
}

impl ServeTls {
    /// The node's TLS options (`None` without --tls-certificate).
    pub fn options(self) -> Option<TlsOptions> {
        Some(TlsOptions {
            certificate: self.tls_certificate?,
            private_key: self.tls_private_key?,
            root_ca: self.tls_root_ca,
            mutual: self.tls_mutual,
            mesh_node_cn: self.mesh_node_cn,
        })
    }
}

/// A client command's TLS flags, for a `tls/<host>:<port>` or `quic/<host>:<port>` endpoint.
#[derive(clap::Args, Clone, Debug)]
pub struct ConnectTls {
    /// The CA certificate (PEM) that signed the node's certificate.
    #[arg(long, value_name = "PEM")]
    pub tls_root_ca: Option<PathBuf>,
    /// This client's certificate (PEM), for a node that requires mutual TLS.
    #[arg(long, value_name = "PEM", requires = "tls_private_key")]
    pub tls_certificate: Option<PathBuf>,
    /// The private key (PEM) of --tls-certificate.
    #[arg(long, value_name = "PEM", requires = "tls_certificate")]
    pub tls_private_key: Option<PathBuf>,
    /// The user to connect as, on a node with an access policy; the password is read from the
    /// environment variable STAMPEDE_PASSWORD (never from the command line, which others can see).
    #[arg(long)]
    pub user: Option<String>,
}

/// Where a client command reads the password of --user.
pub const PASSWORD_ENV: &str = "STAMPEDE_PASSWORD";

impl ConnectTls {
    /// How to connect: within `timeout`, to `node` (through the endpoint's node), with these files.
    pub fn options(self, timeout: Duration, node: Option<String>) -> ConnectOptions {
        let given = self.tls_root_ca.is_some() || self.tls_certificate.is_some();
        let tls = given.then_some(ClientTls {
            root_ca: self.tls_root_ca,
            certificate: self.tls_certificate,
            private_key: self.tls_private_key,
        });
        let user = self
            .user
            .map(|user| stampede::Credentials { user, password: std::env::var(PASSWORD_ENV).unwrap_or_default() });
        ConnectOptions { timeout: Some(timeout), node, tls, user, ..ConnectOptions::default() }
    }
}
