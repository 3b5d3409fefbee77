//! The one rule by which [`MeteredCloud`](super::MeteredCloud) passes an
//! interface call on: a table per capability trait, a line per method.
//!
//! `read name(args) -> Ret` is metered and not fenced; `write name(args)
//! -> Ret, key EXPR` is fenced, and planned under `EXPR` in a dry run;
//! `batch EXPR` records the batch size. Either goes to the wrapped
//! provider's capability `from`, answering `NotImplemented` when it has
//! none. What is not a cloud call (names, sizes, checks) is written out
//! after `also`.

/// `impl $trait for MeteredCloud`, each listed method metered (and, for a
/// write, fenced) around the wrapped provider's capability `$cap`.
macro_rules! mirror {
    (
        impl $trait:ident from $cap:ident {
            $( $kind:ident $name:ident ( $( $arg:ident : $ty:ty ),* ) -> $ret:ty
               $( , key $key:expr )? $( , batch $batch:expr )? ; )*
        }
        also { $( $also:tt )* }
    ) => {
        #[async_trait::async_trait]
        impl $trait for MeteredCloud {
            $(
                async fn $name(&self, $( $arg: $ty ),*) -> $ret {
                    let call = async {
                        self.inner
                            .$cap()
                            .ok_or(CloudError::NotImplemented)?
                            .$name($( $arg ),*)
                            .await
                    };
                    let batch: Option<usize> = None $( .or(Some($batch)) )?;
                    mirror!(@send $kind self, $name, batch, call $( , $key )?)
                }
            )*
            $( $also )*
        }
    };
    (@send read $self:ident, $name:ident, $batch:ident, $call:ident) => {
        $self.metered(stringify!($name), $batch, false, $call).await
    };
    (@send write $self:ident, $name:ident, $batch:ident, $call:ident, $key:expr) => {
        $self.mutate(stringify!($name), $batch, || $key, $call).await
    };
}

pub(super) use mirror;
