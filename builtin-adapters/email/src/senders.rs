//! Who may get answers (`SERVICE_EMAIL_ALLOWED_SENDERS`): whole addresses and `@domain`
//! entries, compared without regard to case. Unset means everyone.

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllowedSenders {
    /// `None`: no list, everyone is allowed.
    entries: Option<Vec<Entry>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Address(String),
    /// The part after `@`; subdomains are not included.
    Domain(String),
}

impl AllowedSenders {
    /// Parses a comma-separated list such as `alice@example.org, @team.example`.
    pub fn parse(list: Option<&str>) -> Result<Self, String> {
        let Some(list) = list else {
            return Ok(Self::default());
        };
        let entries = list
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(entry)
            .collect::<Result<Vec<_>, _>>()?;
        if entries.is_empty() {
            return Err("the list names no sender".to_owned());
        }
        Ok(Self {
            entries: Some(entries),
        })
    }

    pub fn allows(&self, address: &str) -> bool {
        let Some(entries) = &self.entries else {
            return true;
        };
        let address = address.to_ascii_lowercase();
        let domain = address.rsplit_once('@').map(|(_, domain)| domain);
        entries.iter().any(|entry| match entry {
            Entry::Address(allowed) => *allowed == address,
            Entry::Domain(allowed) => domain == Some(allowed.as_str()),
        })
    }
}

fn entry(item: &str) -> Result<Entry, String> {
    let lowered = item.to_ascii_lowercase();
    let valid_part =
        |part: &str| !part.is_empty() && !part.contains('@') && !part.contains(char::is_whitespace);
    match lowered.split_once('@') {
        Some(("", domain)) if valid_part(domain) => Ok(Entry::Domain(domain.to_owned())),
        Some((local, domain)) if valid_part(local) && valid_part(domain) => {
            Ok(Entry::Address(lowered))
        }
        _ => Err(format!(
            "{item:?} is neither an address (name@example.org) nor a domain (@example.org)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_list_allows_everyone() {
        let everyone = AllowedSenders::parse(None).unwrap();
        assert!(everyone.allows("anyone@anywhere.example"));
    }

    #[test]
    fn addresses_and_domains_match_without_case() {
        let allowed = AllowedSenders::parse(Some(" Alice@Example.org ,@Team.example,")).unwrap();
        assert!(allowed.allows("alice@example.org"));
        assert!(allowed.allows("ALICE@EXAMPLE.ORG"));
        assert!(allowed.allows("bob@team.example"));
        assert!(!allowed.allows("bob@example.org"), "only Alice there");
        assert!(!allowed.allows("eve@sub.team.example"), "no subdomains");
        assert!(!allowed.allows("eve@evilteam.example"));
        assert!(!allowed.allows("team.example"));
    }

    #[test]
    fn malformed_entries_are_refused() {
        for list in ["bob", "@", "a@b@c", "bob@", "two words@example.org", " , "] {
            assert!(AllowedSenders::parse(Some(list)).is_err(), "{list:?}");
        }
        assert_eq!(
            AllowedSenders::parse(Some("ok@example.org, bob")).unwrap_err(),
            "\"bob\" is neither an address (name@example.org) nor a domain (@example.org)"
        );
    }
}
