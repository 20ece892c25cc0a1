//! `stampede certs`: a certificate authority and the node and client certificates a TLS mesh
//! needs, as PEM files in one directory (docs/SECURITY.md, "Certificates in three commands").
//!
//! The CA is made once (`ca.pem`, `ca.key`) and reused by later runs, so certificates can be
//! added to a mesh as it grows. A node's certificate names its hosts (subjectAltName: an IP
//! address or a DNS name each, what clients put in their endpoints) and serves both ways
//! (serverAuth for its listener, clientAuth for the nodes it connects to); its common name is the
//! node's name, what `--mesh-node-cn` lists. A client's certificate (clientAuth) has the user's
//! name as its common name. No file is overwritten: a name already made is an error naming it.
//! Private keys are written readable by their owner only.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    SanType,
};

/// The CA's common name: a CA made here is recognised by it (and by its key) when reused.
pub const CA_COMMON_NAME: &str = "Stampede CA";
/// Longest validity `--days` accepts (about ten years).
pub const DAYS_MAX: u32 = 3650;

type Failure = Box<dyn std::error::Error>;

/// A node's certificate to make: its name (the common name) and the hosts it is reached at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSpec {
    pub name: String,
    pub hosts: Vec<String>,
}

/// Parses `NAME=HOST[,HOST...]` (`a=127.0.0.1,localhost`).
pub fn node_spec(text: &str) -> Result<NodeSpec, String> {
    let (name, hosts) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=HOST[,HOST...] (e.g. a=127.0.0.1,localhost)"))?;
    let hosts: Vec<String> = hosts.split(',').map(str::trim).filter(|h| !h.is_empty()).map(str::to_owned).collect();
    if hosts.is_empty() {
        return Err(format!("node {name:?} names no host: NAME=HOST[,HOST...]"));
    }
    if let Some(bad) = hosts.iter().find(|host| !is_host(host)) {
        return Err(format!("{bad:?} is neither an IP address nor a DNS name (letters, digits, '-' and '.')"));
    }
    Ok(NodeSpec { name: file_name(name)?, hosts })
}

/// A name usable as a common name and a file name: letters, digits, `-`, `_` and `.`, not
/// starting with a dot.
pub fn file_name(name: &str) -> Result<String, String> {
    let fits = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.starts_with('.') || !name.chars().all(fits) || name.len() > 64 {
        return Err(format!(
            "{name:?} is not a name for a certificate: 1 to 64 letters, digits, '-', '_' or '.', not starting with '.'"
        ));
    }
    Ok(name.to_owned())
}

/// Makes (or reuses) the CA in `dir` and a certificate for each of `nodes` and `clients`, valid
/// for `days`; prints what it wrote and how to use it.
pub fn run(dir: &Path, nodes: &[NodeSpec], clients: &[String], days: u32) -> Result<(), Failure> {
    if days == 0 || days > DAYS_MAX {
        return Err(format!("--days {days}: between 1 and {DAYS_MAX}").into());
    }
    let names = nodes.iter().map(|n| n.name.as_str()).chain(clients.iter().map(String::as_str));
    let mut seen = std::collections::HashSet::new();
    for name in names {
        if name == "ca" || !seen.insert(name) {
            return Err(
                format!("the name {name:?} is given twice, or is \"ca\": each certificate needs its own").into()
            );
        }
        for file in [pem(dir, name), key(dir, name)] {
            if file.exists() {
                return Err(format!("{} exists already: remove it, or choose another name", file.display()).into());
            }
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let (ca, ca_key, made) = authority(dir, days)?;
    println!("{} {}", if made { "made" } else { "reused" }, pem(dir, "ca").display());
    for node in nodes {
        let sans = node.hosts.iter().map(|h| san(h)).collect::<Result<Vec<_>, _>>()?;
        let usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        issue(dir, &node.name, sans, usages, days, (&ca, &ca_key))?;
        println!("made {} for node {} at {}", pem(dir, &node.name).display(), node.name, node.hosts.join(", "));
    }
    for client in clients {
        issue(dir, client, Vec::new(), vec![ExtendedKeyUsagePurpose::ClientAuth], days, (&ca, &ca_key))?;
        println!("made {} for client {client}", pem(dir, client).display());
    }
    if let Some(node) = nodes.first() {
        let cns: String = nodes.iter().map(|n| format!(" --mesh-node-cn {}", n.name)).collect();
        let d = dir.display();
        println!(
            "serve: stampede serve --name {n} --listen tls/{h}:7447 --tls-certificate {d}/{n}.pem --tls-private-key \
             {d}/{n}.key --tls-root-ca {d}/ca.pem --tls-mutual{cns}",
            n = node.name,
            h = bracketed(&node.hosts[0]),
        );
    }
    Ok(())
}

/// The CA of `dir`: made (and written) when `ca.key` is absent, else rebuilt from its key with
/// the same name, so what it signs chains to the `ca.pem` on disk. `true` when made.
fn authority(dir: &Path, days: u32) -> Result<(Certificate, KeyPair, bool), Failure> {
    let key_path = key(dir, "ca");
    let existing = key_path.exists();
    let key = if existing {
        let text =
            std::fs::read_to_string(&key_path).map_err(|e| format!("cannot read {}: {e}", key_path.display()))?;
        KeyPair::from_pem(&text).map_err(|e| format!("{} is not a private key: {e}", key_path.display()))?
    } else {
        KeyPair::generate()?
    };
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, CA_COMMON_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut params, days);
    let ca = params.self_signed(&key)?;
    if !existing {
        write(&pem(dir, "ca"), &ca.pem(), false)?;
        write(&key_path, &key.serialize_pem(), true)?;
    }
    Ok((ca, key, !existing))
}

/// Signs a certificate for `name` (its common name) with `sans` and `usages`, and writes it and
/// its key.
fn issue(
    dir: &Path,
    name: &str,
    sans: Vec<SanType>,
    usages: Vec<ExtendedKeyUsagePurpose>,
    days: u32,
    (ca, ca_key): (&Certificate, &KeyPair),
) -> Result<(), Failure> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.subject_alt_names = sans;
    params.extended_key_usages = usages;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    validity(&mut params, days);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, ca, ca_key)?;
    write(&pem(dir, name), &cert.pem(), false)?;
    write(&self::key(dir, name), &key.serialize_pem(), true)
}

/// Valid from a day ago (clocks disagree) for `days` days.
fn validity(params: &mut CertificateParams, days: u32) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(i64::from(days));
}

/// Whether `host` is an IP address (an IPv6 one in brackets or not) or a DNS name.
fn is_host(host: &str) -> bool {
    let dns = |h: &str| {
        h.len() <= 253
            && h.split('.').all(|label| {
                (1..=63).contains(&label.len())
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    };
    host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().is_ok() || dns(host)
}

/// A host as a subjectAltName: an IP address, or a DNS name.
fn san(host: &str) -> Result<SanType, Failure> {
    if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    Ok(SanType::DnsName(host.try_into().map_err(|e| format!("{host:?} is neither an IP address nor a DNS name: {e}"))?))
}

/// `host` as it goes in an endpoint: an IPv6 address in brackets.
fn bracketed(host: &str) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
        _ => host.to_owned(),
    }
}

fn pem(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.pem"))
}

fn key(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.key"))
}

/// Writes `text` to a new file at `path` (never over one), readable by its owner only if
/// `private`.
fn write(path: &Path, text: &str, private: bool) -> Result<(), Failure> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    file.write_all(text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_specs_and_names_are_checked() {
        let spec = node_spec("a=127.0.0.1, localhost").unwrap();
        assert_eq!(spec, NodeSpec { name: "a".into(), hosts: vec!["127.0.0.1".into(), "localhost".into()] });
        assert!(node_spec("a=[::1],camera-host.local").is_ok());
        for bad in ["a", "a=", "../a=h", ".a=h", "a b=h", "=h", "a=not_a_host!", "a=-x", "a=x..y"] {
            assert!(node_spec(bad).is_err(), "{bad:?}");
        }
        assert!(file_name(&"x".repeat(65)).is_err());
    }

    /// Nothing is written when a request cannot be met in full: a name given twice, the CA's
    /// name, a validity out of bounds, a certificate that exists already.
    #[test]
    fn a_refused_request_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("certs");
        let a = [node_spec("a=127.0.0.1").unwrap()];
        assert!(run(&out, &a, &["a".into()], 30).is_err(), "a name given twice");
        assert!(run(&out, &[], &["ca".into()], 30).is_err(), "the CA's name");
        assert!(run(&out, &a, &[], 0).is_err() && run(&out, &a, &[], DAYS_MAX + 1).is_err());
        assert!(!out.exists(), "nothing was written");
        run(&out, &a, &[], 30).unwrap();
        let again = run(&out, &a, &["b".into()], 30).unwrap_err().to_string();
        assert!(again.contains("a.pem exists already"), "{again}");
        assert!(!out.join("b.pem").exists(), "the request was refused whole");
    }
}
