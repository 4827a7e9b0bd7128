//! nft
