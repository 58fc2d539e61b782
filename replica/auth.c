#include "auth.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

/* Names what the MAC is for, so the key proves nothing anywhere else. */
static const char LABEL[] = "ftvm partner channel auth v1";

int auth_nonce(uint8_t nonce[AUTH_NONCE_LEN])
{
	return RAND_bytes(nonce, AUTH_NONCE_LEN) == 1 ? 0 : -EIO;
}

static bool add(EVP_MAC_CTX *ctx, const void *data, size_t len)
{
	return EVP_MAC_update(ctx, data, len) == 1;
}

static bool add_id(EVP_MAC_CTX *ctx, const char *id)
{
	uint8_t len = (uint8_t)strnlen(id, UINT8_MAX);

	return add(ctx, &len, 1) && add(ctx, id, len);
}

int auth_proof(const uint8_t *key, size_t key_len, bool prover_dialled, const char *prover_id,
	       const char *verifier_id, const uint8_t prover_nonce[AUTH_NONCE_LEN],
	       const uint8_t verifier_nonce[AUTH_NONCE_LEN], uint8_t ret[AUTH_MAC_LEN])
{
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string("digest", (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};
	const uint8_t role = prover_dialled ? 'D' : 'A';
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
	size_t len = 0;
	int r = -EIO;

	if (ctx && EVP_MAC_init(ctx, key, key_len, params) == 1 && add(ctx, LABEL, sizeof(LABEL)) &&
	    add(ctx, &role, 1) && add_id(ctx, prover_id) && add_id(ctx, verifier_id) &&
	    add(ctx, prover_nonce, AUTH_NONCE_LEN) && add(ctx, verifier_nonce, AUTH_NONCE_LEN) &&
	    EVP_MAC_final(ctx, ret, &len, AUTH_MAC_LEN) == 1 && len == AUTH_MAC_LEN)
		r = 0;
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	return r;
}

bool auth_proof_matches(const uint8_t expected[AUTH_MAC_LEN], const uint8_t *mac, size_t mac_len)
{
	return mac_len == AUTH_MAC_LEN && CRYPTO_memcmp(expected, mac, AUTH_MAC_LEN) == 0;
}
