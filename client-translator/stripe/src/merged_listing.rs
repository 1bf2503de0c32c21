//! A listing with attributes over several servers. Server 0 lists the
//! entries with its own copies' attributes; a file's attributes merge every
//! copy's (size, blocks, times), so the other servers are asked for theirs:
//! one `getattrs` per server for the whole batch, where it used to be a
//! getattr per file per server (256 round trips to each for one batch of
//! `ls -l` or a stat-ahead listing).

use crate::merge::merge_attrs;
use crate::Stripe;
use futures::future::join_all;
use xlator::*;

/// Fill the merged attributes of the files among `entries` (listed in `dir`).
pub(crate) async fn merge_listing(stripe: &Stripe, dir: &Loc, entries: &mut [DirEntry]) -> FsResult<()> {
    let files: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].kind == FileKind::File && entries[i].attr.is_some()).collect();
    if files.is_empty() {
        return Ok(());
    }
    let locs: Vec<Loc> = files.iter().map(|&i| Loc { path: dir.child(&entries[i].name).path, fid: Some(entries[i].fid) }).collect();
    let others: Vec<Vec<Attr>> = join_all(stripe.rest().iter().map(|s| copies(s, &locs))).await.into_iter().collect::<FsResult<_>>()?;
    for (k, &i) in files.iter().enumerate() {
        let mut all: Vec<Attr> = entries[i].attr.take().into_iter().collect();
        all.extend(others.iter().map(|o| o[k].clone()));
        entries[i].attr = Some(merge_attrs(all)?);
    }
    Ok(())
}

/// Server `s`'s copies of `locs`, in order: one `getattrs`; a getattr for
/// each it did not give (a server without `getattrs`, or an entry it could
/// not answer for, whose own getattr gives the error).
async fn copies(s: &Next, locs: &[Loc]) -> FsResult<Vec<Attr>> {
    let batch = match s.getattrs(locs).await {
        Ok(b) if b.len() == locs.len() => b,
        Ok(_) => vec![None; locs.len()],
        Err(e) if e == FsError::ENOSYS || e == FsError::EINVAL => vec![None; locs.len()],
        Err(e) => return Err(e),
    };
    let each = batch.into_iter().zip(locs).map(|(a, l)| async move {
        match a {
            // the copy of the object asked about, nothing else
            Some(a) if Some(a.fid) == l.fid => Ok(a),
            _ => s.getattr(l).await,
        }
    });
    join_all(each).await.into_iter().collect()
}
