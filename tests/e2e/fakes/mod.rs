//! Fakes of outside platforms: real HTTP servers on 127.0.0.1 speaking the real wire protocol,
//! so the production clients run against them unchanged.

pub mod a2a_agent;
pub mod google_calendar;
pub mod llm;
pub mod teamchat;
pub mod twilio;
pub mod webhook_receiver;
