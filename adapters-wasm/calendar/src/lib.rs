//! `calendar`: tools for agents over the operator's calendar, through CalDAV (Nextcloud,
//! Fastmail, iCloud, Radicale...) or the Google Calendar API. `list_calendar_events_today`
//! reads today (in `SERVICE_TZ`), recurring and all-day events expanded;
//! `create_calendar_event` writes, offered only with `SERVICE_CALENDAR_WRITE_ALLOWED=true`.
//! It serves no routes: `start` checks the settings, so the registry entry says what is missing
//! (both ways to configure it when neither is).

wit_bindgen::generate!({
    world: "adapter-host",
    path: "../../wit",
});

mod agenda;
mod caldav;
mod google;
mod http;
mod ical;
mod recur;
mod settings;
mod tools;

use exports::service::adapter::handler::{
    self, Description, HttpRequest, HttpResponse, Job, JobFailure,
};
use exports::service::adapter::{lifecycle, tool_provider};
use guest_util::Response;
use service::adapter::log::{self, Level};
use service::adapter::registry;
use service::adapter::types::ToolSpec;

struct Calendar;

impl From<Response> for HttpResponse {
    fn from(r: Response) -> Self {
        Self {
            status: r.status,
            headers: r.headers,
            body: r.body,
        }
    }
}

impl handler::Guest for Calendar {
    fn describe() -> Description {
        Description {
            name: "calendar".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            routes: Vec::new(),
            // Either backend will do; `start` says what is missing.
            required_secrets: Vec::new(),
            metadata: vec![
                ("tools".into(), format!("{}, {}", tools::LIST, tools::CREATE)),
                (
                    "backends".into(),
                    "CalDAV (SERVICE_CALENDAR_CALDAV_*), Google Calendar (SERVICE_CALENDAR_GOOGLE_*)"
                        .into(),
                ),
            ],
        }
    }

    fn handle_http(_: HttpRequest) -> HttpResponse {
        Response::error(404, "the calendar adapter serves no routes").into()
    }

    fn run_job(_: Job) -> Result<(), JobFailure> {
        Err(JobFailure {
            message: "the calendar adapter queues no jobs".into(),
            retry_after_ms: None,
        })
    }
}

impl lifecycle::Guest for Calendar {
    /// Settings missing are recorded on the entry and the start succeeds (spec 3.2 rule 5),
    /// so the dashboard offers to set them; contradicting ones fail it.
    fn start() -> Result<(), String> {
        settings::zone()?;
        match settings::backend() {
            Ok(_) => Ok(()),
            Err(settings::Problem::Missing(ways)) => {
                registry::needs_settings(&ways);
                Ok(())
            }
            Err(problem) => Err(problem.into()),
        }
    }

    fn stop() -> Result<(), String> {
        Ok(())
    }
}

impl tool_provider::Guest for Calendar {
    fn list_tools() -> Vec<ToolSpec> {
        if let Err(problem) = settings::backend() {
            log::log(
                Level::Warn,
                &format!("no calendar tools offered: {problem}"),
            );
            return Vec::new();
        }
        let mut specs = vec![tools::list_spec()];
        if settings::write_allowed() {
            specs.push(tools::create_spec());
        }
        specs
            .into_iter()
            .map(|spec| ToolSpec {
                name: spec.name.into(),
                description: spec.description.into(),
                parameters_json: spec.parameters.to_string(),
            })
            .collect()
    }

    fn call_tool(name: String, args_json: String) -> Result<String, String> {
        tools::call(&name, &args_json)
    }
}

export!(Calendar);
