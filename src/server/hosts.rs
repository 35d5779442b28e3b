//! DNS-rebinding protection: the `Host` and `Origin` a request may carry.
//!
//! A web page the user visits can make their browser send requests to a server on the user's
//! own loopback (by a name whose DNS answer the page's owner switches to `127.0.0.1`), and run
//! sessions there. Every request is therefore judged before anything else: its `Host` must name
//! this server (a loopback name or address, the address it listens on, or a name given with
//! `--allow-host`), and an `Origin`, when a browser sends one, must name one of those too. A
//! server listening on every address (`0.0.0.0`, `::`) answers any `Host` unless `--allow-host`
//! names its names (there is no one name its clients must use), and still refuses foreign
//! `Origin`s. `--allow-host '*'` turns both checks off (behind a proxy that rewrites them).

use std::net::IpAddr;

/// The names a request may give as its `Host` or `Origin`.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// Lower-case names and address literals (IPv6 without brackets).
    names: Vec<String>,
    /// Whether `Host` is judged at all.
    check_host: bool,
    /// Whether anything is judged (`--allow-host '*'` says no).
    check_any: bool,
    listen: IpAddr,
}

/// Why a request was refused: which header and what it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub header: &'static str,
    pub value: String,
}

impl Refusal {
    /// The message of the 403 answer.
    pub fn message(&self) -> String {
        format!(
            "the request's {} `{}` does not name this server: it answers only requests to a loopback \
             name or address, the address it listens on, or a name given with --allow-host (a \
             guard against DNS rebinding: pages in a browser cannot reach it)",
            self.header, self.value
        )
    }
}

impl Hosts {
    /// The hosts of a server listening on `listen`, with the names of `--allow-host`.
    pub fn new(listen: IpAddr, allowed: &[String]) -> Hosts {
        let check_any = !allowed.iter().any(|a| a.trim() == "*");
        let mut names: Vec<String> = ["localhost", "127.0.0.1", "::1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if !listen.is_unspecified() {
            names.push(listen.to_string());
        }
        names.extend(allowed.iter().map(|a| normal(a.trim())));
        Hosts {
            names,
            check_host: !listen.is_unspecified() || !allowed.is_empty(),
            check_any,
            listen,
        }
    }

    /// Whether a request with these `Host` and `Origin` headers may be answered.
    pub fn judge(&self, host: Option<&str>, origin: Option<&str>) -> Result<(), Refusal> {
        if !self.check_any {
            return Ok(());
        }
        if self.check_host
            && let Some(host) = host
            && !self.names_this_server(strip_port(host))
        {
            return Err(Refusal {
                header: "Host",
                value: host.to_string(),
            });
        }
        if let Some(origin) = origin {
            let named = origin_host(origin).is_some_and(|h| self.names_this_server(h));
            if !named {
                return Err(Refusal {
                    header: "Origin",
                    value: origin.to_string(),
                });
            }
        }
        Ok(())
    }

    fn names_this_server(&self, host: &str) -> bool {
        let host = normal(host);
        if let Ok(ip) = host.parse::<IpAddr>() {
            // An address literal cannot be rebound; it must still be one this server has.
            return ip.is_loopback() || ip == self.listen || self.names.contains(&host);
        }
        self.names.contains(&host)
    }
}

/// A name as compared: lower case, without a trailing dot or IPv6 brackets.
fn normal(name: &str) -> String {
    let name = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// `host[:port]` or `[v6]:port` without the port.
fn strip_port(authority: &str) -> &str {
    let authority = authority.trim();
    if let Some(rest) = authority.strip_prefix('[') {
        return match rest.find(']') {
            Some(end) => &authority[..end + 2],
            None => authority,
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => authority,
    }
}

/// The host of an `Origin` (`scheme://host[:port]`); `None` for `null` and what is no origin.
fn origin_host(origin: &str) -> Option<&str> {
    let (scheme, rest) = origin.trim().split_once("://")?;
    if scheme.is_empty() || rest.is_empty() || rest.contains('/') {
        return None;
    }
    Some(strip_port(rest))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn loopback() -> Hosts {
        Hosts::new("127.0.0.1".parse().unwrap(), &[])
    }

    #[test]
    fn a_loopback_server_answers_loopback_hosts_with_any_port() {
        let hosts = loopback();
        for host in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:80",
            "LOCALHOST.",
        ] {
            assert_eq!(hosts.judge(Some(host), None), Ok(()), "{host}");
        }
        assert_eq!(hosts.judge(None, None), Ok(()));
        assert_eq!(
            hosts.judge(Some("localhost:8080"), Some("http://127.0.0.1:8080")),
            Ok(())
        );
    }

    #[test]
    fn a_rebound_name_or_a_foreign_origin_is_refused_naming_the_header() {
        let hosts = loopback();
        let refused = hosts
            .judge(Some("evil.example.com:8080"), None)
            .unwrap_err();
        assert_eq!(refused.header, "Host");
        assert!(refused.message().contains("evil.example.com:8080"));
        let refused = hosts
            .judge(Some("127.0.0.1:8080"), Some("http://evil.example.com"))
            .unwrap_err();
        assert_eq!(refused.header, "Origin");
        for origin in ["null", "file://", "http://localhost.evil.example.com"] {
            assert!(
                hosts.judge(Some("localhost"), Some(origin)).is_err(),
                "{origin}"
            );
        }
        assert!(hosts.judge(Some("10.0.0.5"), None).is_err());
    }

    #[test]
    fn a_server_on_every_address_answers_any_host_but_no_foreign_origin() {
        let hosts = Hosts::new("0.0.0.0".parse().unwrap(), &[]);
        assert_eq!(hosts.judge(Some("node-17.cluster:8080"), None), Ok(()));
        assert!(
            hosts
                .judge(Some("node-17"), Some("https://evil.example.com"))
                .is_err()
        );
        let named = Hosts::new("0.0.0.0".parse().unwrap(), &["node-17.cluster".into()]);
        assert_eq!(named.judge(Some("node-17.cluster:8080"), None), Ok(()));
        assert!(named.judge(Some("evil.example.com"), None).is_err());
    }

    #[test]
    fn allow_host_names_more_and_a_star_turns_the_checks_off() {
        let listen: IpAddr = "127.0.0.1".parse().unwrap();
        let hosts = Hosts::new(listen, &["envcraft.internal".into()]);
        assert_eq!(hosts.judge(Some("envcraft.internal:80"), None), Ok(()));
        let open = Hosts::new(listen, &["*".into()]);
        assert_eq!(
            open.judge(Some("evil.example.com"), Some("http://evil.example.com")),
            Ok(())
        );
    }

    #[test]
    fn the_address_it_listens_on_is_its_own() {
        let hosts = Hosts::new("192.168.1.9".parse().unwrap(), &[]);
        assert_eq!(hosts.judge(Some("192.168.1.9:8080"), None), Ok(()));
        assert!(hosts.judge(Some("192.168.1.10:8080"), None).is_err());
        assert!(hosts.judge(Some("evil.example.com"), None).is_err());
    }
}
