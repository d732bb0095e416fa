//! CalDAV (RFC 4791) as Nextcloud, Fastmail, iCloud and Radicale speak it: find the
//! calendars from whatever URL the operator gave (a server root, a principal, a calendar home
//! or one calendar), query a time range, and PUT a new event. The user and app password go in
//! as `{{basic:...}}`, filled in by the host, so they never enter the sandbox.

use roxmltree::Node;

use crate::agenda::{Day, Occurrence, occurrences};
use crate::http::{excerpt, send};
use crate::ical;
use crate::service::adapter::outbound_http::Response;
use crate::settings::{CALDAV_PASSWORD, CALDAV_USER};

const DAV: &str = "DAV:";
const CALDAV: &str = "urn:ietf:params:xml:ns:caldav";
/// Calendars looked at, at most.
pub const MAX_CALENDARS: usize = 20;

/// One calendar collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    pub url: String,
    pub name: String,
}

fn credentials() -> String {
    format!("{{{{basic:{CALDAV_USER}:{CALDAV_PASSWORD}}}}}")
}

const PROPS: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<d:propfind xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav">
  <d:prop>
    <d:resourcetype/>
    <d:displayname/>
    <d:current-user-principal/>
    <c:calendar-home-set/>
    <c:supported-calendar-component-set/>
  </d:prop>
</d:propfind>"#;

/// A WebDAV request with the credentials; a refusal reads as what it means.
fn dav(method: &str, url: &str, depth: &str, body: &str) -> Result<Response, String> {
    let auth = credentials();
    let headers = [
        ("authorization", auth.as_str()),
        ("depth", depth),
        ("content-type", "application/xml; charset=utf-8"),
    ];
    let response = send(method, url, &headers, body)?;
    check(method, url, &response)?;
    Ok(response)
}

fn check(method: &str, url: &str, response: &Response) -> Result<(), String> {
    match response.status {
        200..=299 => Ok(()),
        401 => Err(format!(
            "the CalDAV server refused the user name or password (401 on {method} {url}): check \
             {CALDAV_USER} and {CALDAV_PASSWORD} (many providers need an app password)"
        )),
        403 => Err(format!(
            "the CalDAV server forbids {method} {url} (403) for this user"
        )),
        404 => Err(format!("the CalDAV server has nothing at {url} (404)")),
        status => Err(format!(
            "the CalDAV server answered {status} to {method} {url}: {}",
            excerpt(response)
        )),
    }
}

/// `href` resolved against the URL it came from (absolute, rooted, or relative).
fn resolve(base: &str, href: &str) -> String {
    let href = href.trim();
    if href.starts_with("http://") || href.starts_with("https://") {
        return href.to_owned();
    }
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let origin_end = base[after_scheme..]
        .find('/')
        .map_or(base.len(), |i| after_scheme + i);
    if href.starts_with('/') {
        return format!("{}{href}", &base[..origin_end]);
    }
    let dir_end = base
        .rfind('/')
        .filter(|i| *i >= origin_end)
        .map_or(base.len(), |i| i + 1);
    format!("{}{href}", &base[..dir_end])
}

/// What a multistatus says of one resource (its successful properties only).
#[derive(Debug, Default)]
struct Resource {
    href: String,
    calendar: bool,
    name: Option<String>,
    principal: Option<String>,
    home: Option<String>,
    /// `None`: the server did not say, so it may hold events.
    components: Option<Vec<String>>,
    data: Option<String>,
}

fn is(node: &Node, ns: &str, name: &str) -> bool {
    node.is_element() && node.tag_name().name() == name && node.tag_name().namespace() == Some(ns)
}

fn child<'a, 'i>(node: Node<'a, 'i>, ns: &str, name: &str) -> Option<Node<'a, 'i>> {
    node.children().find(|c| is(c, ns, name))
}

fn multistatus(xml: &str) -> Result<Vec<Resource>, String> {
    let doc = roxmltree::Document::parse(xml)
        .map_err(|e| format!("the CalDAV server sent XML this adapter cannot read: {e}"))?;
    let href_in = |node: Option<Node>| {
        node.and_then(|n| child(n, DAV, "href"))
            .and_then(|h| h.text())
            .map(|t| t.trim().to_owned())
    };
    let mut out = Vec::new();
    for response in doc.descendants().filter(|n| is(n, DAV, "response")) {
        let mut resource = Resource {
            href: href_in(Some(response)).unwrap_or_default(),
            ..Resource::default()
        };
        for propstat in response.children().filter(|n| is(n, DAV, "propstat")) {
            let ok = child(propstat, DAV, "status")
                .and_then(|s| s.text())
                .is_some_and(|s| s.contains(" 200"));
            let Some(prop) = child(propstat, DAV, "prop").filter(|_| ok) else {
                continue;
            };
            for p in prop.children().filter(|n| n.is_element()) {
                match (p.tag_name().namespace(), p.tag_name().name()) {
                    (Some(DAV), "resourcetype") => {
                        resource.calendar = child(p, CALDAV, "calendar").is_some()
                    }
                    (Some(DAV), "displayname") => {
                        resource.name = p
                            .text()
                            .map(|t| t.trim().to_owned())
                            .filter(|t| !t.is_empty())
                    }
                    (Some(DAV), "current-user-principal") => resource.principal = href_in(Some(p)),
                    (Some(CALDAV), "calendar-home-set") => resource.home = href_in(Some(p)),
                    (Some(CALDAV), "supported-calendar-component-set") => {
                        resource.components = Some(
                            p.children()
                                .filter(|c| is(c, CALDAV, "comp"))
                                .filter_map(|c| c.attribute("name"))
                                .map(|n| n.to_ascii_uppercase())
                                .collect(),
                        )
                    }
                    (Some(CALDAV), "calendar-data") => resource.data = p.text().map(str::to_owned),
                    _ => {}
                }
            }
        }
        out.push(resource);
    }
    Ok(out)
}

fn propfind(url: &str, depth: &str) -> Result<Vec<Resource>, String> {
    let response = dav("PROPFIND", url, depth, PROPS)?;
    multistatus(&String::from_utf8_lossy(&response.body))
}

/// A calendar's name: its display name, else the last segment of its path.
fn name_of(url: &str, name: Option<String>) -> String {
    name.unwrap_or_else(|| {
        url.trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned()
    })
}

fn with_slash(url: String) -> String {
    if url.ends_with('/') {
        url
    } else {
        format!("{url}/")
    }
}

/// The event calendars reachable from `url`.
pub fn calendars(url: &str) -> Result<Vec<Calendar>, String> {
    let itself = propfind(url, "0")?;
    let first = itself.into_iter().next().unwrap_or_default();
    if first.calendar {
        return Ok(vec![Calendar {
            name: name_of(url, first.name),
            url: with_slash(url.to_owned()),
        }]);
    }
    let home = match (first.home, first.principal) {
        (Some(home), _) => resolve(url, &home),
        (None, Some(principal)) if resolve(url, &principal) != url => {
            let principal = resolve(url, &principal);
            let found = propfind(&principal, "0")?
                .into_iter()
                .next()
                .unwrap_or_default();
            found
                .home
                .map_or(principal.clone(), |h| resolve(&principal, &h))
        }
        _ => url.to_owned(),
    };
    let found = propfind(&home, "1")?
        .into_iter()
        .filter(|r| r.calendar)
        .filter(|r| {
            r.components
                .as_ref()
                .is_none_or(|c| c.iter().any(|c| c == "VEVENT"))
        })
        .take(MAX_CALENDARS)
        .map(|r| {
            let url = with_slash(resolve(&home, &r.href));
            Calendar {
                name: name_of(&url, r.name),
                url,
            }
        })
        .collect::<Vec<_>>();
    match found.is_empty() {
        true => Err(format!("no event calendar was found at {home}")),
        false => Ok(found),
    }
}

/// The calendar named `wanted` (its display name or path segment, any case), or every one.
pub fn choose(all: Vec<Calendar>, wanted: Option<&str>) -> Result<Vec<Calendar>, String> {
    let Some(wanted) = wanted else {
        return Ok(all);
    };
    let matches = |c: &Calendar| {
        c.name.eq_ignore_ascii_case(wanted) || name_of(&c.url, None).eq_ignore_ascii_case(wanted)
    };
    match all.iter().find(|c| matches(c)) {
        Some(found) => Ok(vec![found.clone()]),
        None => Err(format!(
            "there is no calendar named {wanted:?}; the calendars are: {}",
            all.iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// UTC in the form `time-range` wants.
fn utc(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// The day's occurrences in `calendar`. The server narrows by time range (a day around the
/// asked one, as floating times are the server's guess); expansion happens here.
pub fn day(
    calendar: &Calendar,
    day: &Day,
    warnings: &mut Vec<String>,
) -> Result<Vec<Occurrence>, String> {
    let margin = jiff::SignedDuration::from_hours(24);
    let query = format!(
        r#"<?xml version="1.0" encoding="utf-8"?>
<c:calendar-query xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav">
  <d:prop><d:getetag/><c:calendar-data/></d:prop>
  <c:filter>
    <c:comp-filter name="VCALENDAR">
      <c:comp-filter name="VEVENT">
        <c:time-range start="{}" end="{}"/>
      </c:comp-filter>
    </c:comp-filter>
  </c:filter>
</c:calendar-query>"#,
        utc(day.start - margin),
        utc(day.end + margin)
    );
    let response = dav("REPORT", &calendar.url, "1", &query)?;
    let mut found = Vec::new();
    for resource in multistatus(&String::from_utf8_lossy(&response.body))? {
        let Some(data) = resource.data else {
            continue;
        };
        let parsed = ical::parse(&data);
        warnings.extend(parsed.warnings);
        found.extend(occurrences(&parsed.events, day, &calendar.name, warnings));
    }
    Ok(found)
}

/// Stores a new event as `<uid>.ics` in `calendar` (never over an existing one).
pub fn create(calendar: &Calendar, uid: &str, ics: &str) -> Result<String, String> {
    let url = format!("{}{}.ics", calendar.url, guest_util::percent_encode(uid));
    let auth = credentials();
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "text/calendar; charset=utf-8"),
        ("if-none-match", "*"),
    ];
    let response = send("PUT", &url, &headers, ics)?;
    check("PUT", &url, &response)?;
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_hrefs() {
        let base = "https://dav.example:8443/remote.php/dav/calendars/ana/";
        assert_eq!(
            resolve(base, "/principals/ana/"),
            "https://dav.example:8443/principals/ana/"
        );
        assert_eq!(resolve(base, "work/"), format!("{base}work/"));
        assert_eq!(
            resolve(base, "https://p1.example/x/"),
            "https://p1.example/x/"
        );
        assert_eq!(resolve("http://h:1", "/a/"), "http://h:1/a/");
    }

    #[test]
    fn reads_multistatus_in_any_prefix() {
        let xml = r#"<?xml version="1.0"?>
<multistatus xmlns="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">
  <response><href>/ana/</href>
    <propstat><prop><resourcetype><collection/></resourcetype>
      <C:calendar-home-set><href>/ana/</href></C:calendar-home-set></prop>
      <status>HTTP/1.1 200 OK</status></propstat>
    <propstat><prop><displayname/></prop><status>HTTP/1.1 404 Not Found</status></propstat>
  </response>
  <response><href>/ana/work/</href>
    <propstat><prop><resourcetype><collection/><C:calendar/></resourcetype>
      <displayname>Work</displayname>
      <C:supported-calendar-component-set><C:comp name="VEVENT"/></C:supported-calendar-component-set>
    </prop><status>HTTP/1.1 200 OK</status></propstat>
  </response>
  <response><href>/ana/tasks/</href>
    <propstat><prop><resourcetype><collection/><C:calendar/></resourcetype>
      <C:supported-calendar-component-set><C:comp name="VTODO"/></C:supported-calendar-component-set>
    </prop><status>HTTP/1.1 200 OK</status></propstat>
  </response>
</multistatus>"#;
        let found = multistatus(xml).unwrap();
        assert_eq!(found.len(), 3);
        assert!(!found[0].calendar);
        assert_eq!(found[0].home.as_deref(), Some("/ana/"));
        assert_eq!(found[0].name, None);
        assert!(found[1].calendar);
        assert_eq!(found[1].name.as_deref(), Some("Work"));
        assert_eq!(
            found[2].components.as_deref(),
            Some(&["VTODO".to_owned()][..])
        );
        assert!(multistatus("<not xml").is_err());
    }

    #[test]
    fn chooses_by_name_or_path() {
        let all = vec![
            Calendar {
                url: "http://h/ana/work/".into(),
                name: "Work".into(),
            },
            Calendar {
                url: "http://h/ana/b7f1/".into(),
                name: "Family".into(),
            },
        ];
        assert_eq!(
            choose(all.clone(), Some("family")).unwrap()[0].name,
            "Family"
        );
        assert_eq!(choose(all.clone(), Some("B7F1")).unwrap()[0].name, "Family");
        assert_eq!(choose(all.clone(), None).unwrap().len(), 2);
        let missing = choose(all, Some("Gym")).unwrap_err();
        assert!(missing.contains("Work, Family"), "{missing}");
    }
}
