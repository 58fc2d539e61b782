/* Proving the pair's shared key on the partner channel: fresh nonces and
 * the HMAC-SHA256 proofs of the handshake (replica/session.c,
 * "Authentication"). The cryptography is OpenSSL's libcrypto.
 *
 * A proof is HMAC-SHA256(key, label | role | prover id | verifier id |
 * prover nonce | verifier nonce), each id preceded by its length. The role
 * says whether the prover dialled the connection or accepted it, so a proof
 * made on one connection cannot be reflected back, or relayed to the
 * partner on a connection dialled the other way; the verifier's fresh nonce
 * makes a recorded proof worthless on any later connection. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUTH_NONCE_LEN 32u
#define AUTH_MAC_LEN 32u

/* Fills nonce with AUTH_NONCE_LEN bytes from the system's CSPRNG: 0, or
 * -EIO when it has none to give. */
int auth_nonce(uint8_t nonce[AUTH_NONCE_LEN]);

/* The proof that the node prover_id, which dialled the connection when
 * prover_dialled, holds key, for verifier_id: 0, or -EIO. */
int auth_proof(const uint8_t *key, size_t key_len, bool prover_dialled, const char *prover_id,
	       const char *verifier_id, const uint8_t prover_nonce[AUTH_NONCE_LEN],
	       const uint8_t verifier_nonce[AUTH_NONCE_LEN], uint8_t ret[AUTH_MAC_LEN]);

/* Whether mac (mac_len bytes, as received) is the proof expected, compared
 * in constant time. */
bool auth_proof_matches(const uint8_t expected[AUTH_MAC_LEN], const uint8_t *mac, size_t mac_len);
