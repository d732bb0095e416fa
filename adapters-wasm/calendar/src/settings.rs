//! The operator's settings, read through `secrets` on every call (so a changed value counts at
//! once, except what the grant resolves at load: the servers it may reach).

use jiff::tz::TimeZone;

use crate::service::adapter::secrets;

pub const CALDAV_URL: &str = "SERVICE_CALENDAR_CALDAV_URL";
pub const CALDAV_USER: &str = "SERVICE_CALENDAR_CALDAV_USER";
pub const CALDAV_PASSWORD: &str = "SERVICE_CALENDAR_CALDAV_PASSWORD";
pub const GOOGLE_CLIENT_ID: &str = "SERVICE_CALENDAR_GOOGLE_CLIENT_ID";
pub const GOOGLE_CLIENT_SECRET: &str = "SERVICE_CALENDAR_GOOGLE_CLIENT_SECRET";
pub const GOOGLE_REFRESH_TOKEN: &str = "SERVICE_CALENDAR_GOOGLE_REFRESH_TOKEN";
pub const GOOGLE_API_BASE: &str = "SERVICE_CALENDAR_GOOGLE_API_BASE";
pub const GOOGLE_TOKEN_URL: &str = "SERVICE_CALENDAR_GOOGLE_TOKEN_URL";
pub const DEFAULT_CALENDAR: &str = "SERVICE_CALENDAR_DEFAULT";
pub const WRITE_ALLOWED: &str = "SERVICE_CALENDAR_WRITE_ALLOWED";
pub const ZONE: &str = "SERVICE_TZ";

const DEFAULT_GOOGLE_API_BASE: &str = "https://www.googleapis.com/calendar/v3";
const DEFAULT_GOOGLE_TOKEN_URL: &str = "https://oauth2.googleapis.com/token";

/// A setting, `None` when unset or blank.
pub fn get(name: &str) -> Option<String> {
    secrets::get(name)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// Which calendar service the settings name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    CalDav { url: String },
    Google { api_base: String, token_url: String },
}

/// Why there is no backend to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Settings are missing: the ways to configure it, each the variables of that way that
    /// are not set (any one way set in full will do).
    Missing(Vec<Vec<String>>),
    /// The settings contradict each other.
    Invalid(String),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing(ways) => {
                let said: Vec<String> = ways
                    .iter()
                    .map(|way| match way.as_slice() {
                        [one] => format!("{one} is not set"),
                        names => format!("{} are not set", names.join(" and ")),
                    })
                    .collect();
                f.write_str(&said.join("; or "))
            }
            Self::Invalid(message) => f.write_str(message),
        }
    }
}

impl From<Problem> for String {
    fn from(problem: Problem) -> Self {
        problem.to_string()
    }
}

/// The configured backend, or what is missing. CalDAV needs its URL, user and password;
/// Google its client id, client secret and refresh token; naming both is a mistake. With
/// neither named, both ways are missing.
pub fn backend() -> Result<Backend, Problem> {
    let unset = |names: &[&str]| -> Vec<String> {
        names
            .iter()
            .filter(|n| !secrets::is_set(n))
            .map(|n| (*n).to_owned())
            .collect()
    };
    let missing = |names: &[&str]| match unset(names) {
        way if way.is_empty() => Ok(()),
        way => Err(Problem::Missing(vec![way])),
    };
    match (get(CALDAV_URL), get(GOOGLE_REFRESH_TOKEN).is_some()) {
        (Some(_), true) => Err(Problem::Invalid(format!(
            "both CalDAV and Google are configured: unset {CALDAV_URL} or {GOOGLE_REFRESH_TOKEN}"
        ))),
        (Some(url), false) => {
            missing(&[CALDAV_USER, CALDAV_PASSWORD])?;
            Ok(Backend::CalDav { url })
        }
        (None, true) => {
            missing(&[GOOGLE_CLIENT_ID, GOOGLE_CLIENT_SECRET])?;
            Ok(Backend::Google {
                api_base: get(GOOGLE_API_BASE).unwrap_or_else(|| DEFAULT_GOOGLE_API_BASE.into()),
                token_url: get(GOOGLE_TOKEN_URL).unwrap_or_else(|| DEFAULT_GOOGLE_TOKEN_URL.into()),
            })
        }
        (None, false) => Err(Problem::Missing(vec![
            unset(&[CALDAV_URL, CALDAV_USER, CALDAV_PASSWORD]),
            unset(&[GOOGLE_CLIENT_ID, GOOGLE_CLIENT_SECRET, GOOGLE_REFRESH_TOKEN]),
        ])),
    }
}

/// `SERVICE_TZ`, the zone "today" is in and floating times are read in; UTC when unset
/// (a guest cannot see the machine's zone).
pub fn zone() -> Result<TimeZone, String> {
    match get(ZONE) {
        None => Ok(TimeZone::UTC),
        Some(name) => TimeZone::get(&name)
            .map_err(|_| format!("{ZONE}={name:?} is not an IANA time zone name")),
    }
}

/// Whether `create_calendar_event` may write.
pub fn write_allowed() -> bool {
    get(WRITE_ALLOWED).as_deref() == Some("true")
}

/// The calendar a tool call that names none uses.
pub fn default_calendar() -> Option<String> {
    get(DEFAULT_CALENDAR)
}
