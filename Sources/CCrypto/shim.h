#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
