//! What crosses the storage layer, the same for both backends: parameters bound to a statement
//! ([`Param`], written with [`params!`](crate::params)) and columns read from a row
//! ([`FromValue`]). Each backend converts to its own types at the edge, by the type the
//! database expects, so SQL written once binds an `i64` to an `INTEGER` (SQLite) or to an
//! `int4` or `int8` (PostgreSQL) alike.

use std::borrow::Cow;
use std::error::Error as StdError;

use bytes::BytesMut;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

/// A parameter for one statement, borrowed (or owned, for a statement sent later).
#[derive(Debug, Clone)]
pub enum Param<'a> {
    Null,
    Int(i64),
    Real(f64),
    Bool(bool),
    Text(Cow<'a, str>),
    Blob(Cow<'a, [u8]>),
}

impl Param<'_> {
    /// The same parameter, owning its text or bytes.
    pub fn into_owned(self) -> Param<'static> {
        match self {
            Self::Null => Param::Null,
            Self::Int(v) => Param::Int(v),
            Self::Real(v) => Param::Real(v),
            Self::Bool(v) => Param::Bool(v),
            Self::Text(v) => Param::Text(Cow::Owned(v.into_owned())),
            Self::Blob(v) => Param::Blob(Cow::Owned(v.into_owned())),
        }
    }
}

/// A Rust value that binds as a statement parameter.
pub trait ToParam {
    fn to_param(&self) -> Param<'_>;
}

/// `params![a, b, c]`: the parameters of one statement, in `?1`, `?2`, ... order.
#[macro_export]
macro_rules! params {
    () => { &[] as &[&dyn $crate::db::ToParam] };
    ($($param:expr),+ $(,)?) => {
        &[$(&$param as &dyn $crate::db::ToParam),+] as &[&dyn $crate::db::ToParam]
    };
}

impl ToParam for Param<'_> {
    fn to_param(&self) -> Param<'_> {
        match self {
            Self::Text(v) => Param::Text(Cow::Borrowed(v)),
            Self::Blob(v) => Param::Blob(Cow::Borrowed(v)),
            other => other.clone(),
        }
    }
}

impl<T: ToParam + ?Sized> ToParam for &T {
    fn to_param(&self) -> Param<'_> {
        (**self).to_param()
    }
}

impl<T: ToParam> ToParam for Option<T> {
    fn to_param(&self) -> Param<'_> {
        self.as_ref().map_or(Param::Null, ToParam::to_param)
    }
}

impl ToParam for str {
    fn to_param(&self) -> Param<'_> {
        Param::Text(Cow::Borrowed(self))
    }
}

impl ToParam for String {
    fn to_param(&self) -> Param<'_> {
        Param::Text(Cow::Borrowed(self))
    }
}

impl ToParam for [u8] {
    fn to_param(&self) -> Param<'_> {
        Param::Blob(Cow::Borrowed(self))
    }
}

impl ToParam for Vec<u8> {
    fn to_param(&self) -> Param<'_> {
        Param::Blob(Cow::Borrowed(self))
    }
}

impl ToParam for bool {
    fn to_param(&self) -> Param<'_> {
        Param::Bool(*self)
    }
}

impl ToParam for f64 {
    fn to_param(&self) -> Param<'_> {
        Param::Real(*self)
    }
}

macro_rules! int_params {
    ($($t:ty),*) => {$(
        impl ToParam for $t {
            fn to_param(&self) -> Param<'_> {
                // Counts, sizes and unix milliseconds: far below i64::MAX in practice; a
                // larger value saturates instead of wrapping.
                Param::Int(i64::try_from(*self).unwrap_or(i64::MAX))
            }
        }
    )*};
}

int_params!(i32, i64, u32, u64, usize);

/// A column as read from a row, owned.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Self::Null => "NULL",
            Self::Int(_) => "an integer",
            Self::Real(_) => "a real",
            Self::Text(_) => "text",
            Self::Blob(_) => "a blob",
        }
    }
}

/// A Rust type a column converts into.
pub trait FromValue: Sized {
    fn from_value(value: Value) -> Result<Self, String>;
}

fn mismatch<T>(value: &Value, wanted: &str) -> Result<T, String> {
    Err(format!("expected {wanted}, found {}", value.kind()))
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            value => T::from_value(value).map(Some),
        }
    }
}

impl FromValue for i64 {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Int(v) => Ok(v),
            other => mismatch(&other, "an integer"),
        }
    }
}

macro_rules! narrow_ints {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(value: Value) -> Result<Self, String> {
                let wide = i64::from_value(value)?;
                <$t>::try_from(wide).map_err(|_| format!("{wide} is out of range for {}", stringify!($t)))
            }
        }
    )*};
}

narrow_ints!(i32, u32, u64, usize);

impl FromValue for bool {
    fn from_value(value: Value) -> Result<Self, String> {
        i64::from_value(value).map(|v| v != 0)
    }
}

impl FromValue for f64 {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Real(v) => Ok(v),
            Value::Int(v) => Ok(v as f64),
            other => mismatch(&other, "a number"),
        }
    }
}

impl FromValue for String {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Text(v) => Ok(v),
            other => mismatch(&other, "text"),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Blob(v) => Ok(v),
            // SQLite hands a blob written as text back as text.
            Value::Text(v) => Ok(v.into_bytes()),
            other => mismatch(&other, "a blob"),
        }
    }
}

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Self::Null => ValueRef::Null,
            Self::Int(v) => ValueRef::Integer(*v),
            Self::Real(v) => ValueRef::Real(*v),
            Self::Bool(v) => ValueRef::Integer(i64::from(*v)),
            Self::Text(v) => ValueRef::Text(v.as_bytes()),
            Self::Blob(v) => ValueRef::Blob(v),
        }))
    }
}

impl From<rusqlite::types::ValueRef<'_>> for Value {
    fn from(value: rusqlite::types::ValueRef<'_>) -> Self {
        use rusqlite::types::ValueRef;
        match value {
            ValueRef::Null => Self::Null,
            ValueRef::Integer(v) => Self::Int(v),
            ValueRef::Real(v) => Self::Real(v),
            ValueRef::Text(v) => Self::Text(String::from_utf8_lossy(v).into_owned()),
            ValueRef::Blob(v) => Self::Blob(v.to_vec()),
        }
    }
}

type BoxError = Box<dyn StdError + Sync + Send>;

impl ToSql for Param<'_> {
    /// Converts to the type PostgreSQL inferred for the parameter.
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match (self, ty) {
            (Self::Null, _) => Ok(IsNull::Yes),
            (&Self::Int(v), &Type::INT8) => v.to_sql(ty, out),
            (&Self::Int(v), &Type::INT4) => i32::try_from(v)?.to_sql(ty, out),
            (&Self::Int(v), &Type::INT2) => i16::try_from(v)?.to_sql(ty, out),
            (&Self::Int(v), &Type::FLOAT8) => (v as f64).to_sql(ty, out),
            (&Self::Int(v), &Type::BOOL) => (v != 0).to_sql(ty, out),
            (&Self::Bool(v), &Type::BOOL) => v.to_sql(ty, out),
            (&Self::Bool(v), &Type::INT8) => i64::from(v).to_sql(ty, out),
            (&Self::Bool(v), &Type::INT4) => i32::from(v).to_sql(ty, out),
            (&Self::Real(v), &Type::FLOAT8) => v.to_sql(ty, out),
            (&Self::Real(v), &Type::FLOAT4) => (v as f32).to_sql(ty, out),
            (Self::Text(v), &Type::TEXT | &Type::VARCHAR | &Type::BPCHAR | &Type::NAME) => {
                v.as_ref().to_sql(ty, out)
            }
            (Self::Blob(v), &Type::BYTEA) => v.as_ref().to_sql(ty, out),
            (param, ty) => Err(format!("cannot bind {param:?} to a parameter of type {ty}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Reads column `index` of a PostgreSQL row by its declared type.
pub(super) fn postgres_column(
    row: &tokio_postgres::Row,
    index: usize,
) -> Result<Value, tokio_postgres::Error> {
    let ty = row.columns()[index].type_();
    Ok(match *ty {
        Type::BOOL => row
            .try_get::<_, Option<bool>>(index)?
            .map_or(Value::Null, |v| Value::Int(i64::from(v))),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(index)?
            .map_or(Value::Null, |v| Value::Int(v.into())),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(index)?
            .map_or(Value::Null, |v| Value::Int(v.into())),
        Type::INT8 => row
            .try_get::<_, Option<i64>>(index)?
            .map_or(Value::Null, Value::Int),
        Type::FLOAT4 => row
            .try_get::<_, Option<f32>>(index)?
            .map_or(Value::Null, |v| Value::Real(v.into())),
        Type::FLOAT8 => row
            .try_get::<_, Option<f64>>(index)?
            .map_or(Value::Null, Value::Real),
        Type::BYTEA => row
            .try_get::<_, Option<Vec<u8>>>(index)?
            .map_or(Value::Null, Value::Blob),
        // Text and anything else that reads as text (names, varchar).
        _ => row
            .try_get::<_, Option<String>>(index)?
            .map_or(Value::Null, Value::Text),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_convert_to_what_the_caller_reads() {
        assert_eq!(u32::from_value(Value::Int(7)), Ok(7));
        assert!(u32::from_value(Value::Int(-1)).is_err());
        assert_eq!(bool::from_value(Value::Int(1)), Ok(true));
        assert_eq!(Option::<String>::from_value(Value::Null), Ok(None));
        assert_eq!(
            String::from_value(Value::Int(1)),
            Err("expected text, found an integer".into())
        );
    }

    #[test]
    fn params_borrow_what_they_bind() {
        let name = String::from("n");
        let none: Option<i64> = None;
        let bound = crate::params![name, 3u32, none, true, b"x".as_slice()];
        let kinds: Vec<String> = bound
            .iter()
            .map(|p| format!("{:?}", p.to_param()))
            .collect();
        assert_eq!(
            kinds,
            ["Text(\"n\")", "Int(3)", "Null", "Bool(true)", "Blob([120])"]
        );
    }
}
