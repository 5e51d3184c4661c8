//! SQL for `list_cursor_key`: the one secret the lists' cursors are signed with, made
//! by the schema so that every instance of every function signs alike.

use super::{DbError, GenericClient};

statements![READ];

pub const READ: &str = "SELECT secret FROM list_cursor_key WHERE id = 1";

pub async fn read(c: &impl GenericClient) -> Result<[u8; 32], DbError> {
    let row = c.opt_row(READ, &[]).await?.ok_or_else(|| DbError::Corrupt("no list cursor key".into()))?;
    let secret: Vec<u8> = row.try_get(0)?;
    secret.try_into().map_err(|_| DbError::Corrupt("the list cursor key is not 32 bytes".into()))
}
