#!/usr/bin/env bash
# Write the secret files deploy/compose.yaml reads (deploy/secrets/, never committed):
# random passwords for Redis, PostgreSQL and MinIO, the URLs that carry them, a dashboard
# token, the workers' S3 credentials file (boto3's INI form) and a proxy list to edit. Existing files are kept.
#   deploy/make-secrets.sh
# The directory is 0700 (no other user of this host can reach the files) and the files 0644:
# compose mounts each file into its container as it is, where crawlfleet runs as uid 10001.
set -euo pipefail
cd "$(dirname "$0")/secrets"
chmod 700 .
umask 022

random() { python3 -c 'import secrets; print(secrets.token_urlsafe(24))'; }
keep() { [ -s "$1" ] && echo "kept $1" && return 0; return 1; }

keep redis_password || random > redis_password
keep postgres_password || random > postgres_password
keep redis_url || echo "redis://:$(cat redis_password)@redis:6379/0" > redis_url
keep postgres_dsn || echo "postgresql://crawlfleet:$(cat postgres_password)@postgres:5432/crawl" > postgres_dsn
keep dashboard_token || random > dashboard_token
keep minio_root_user || echo crawlfleet > minio_root_user
keep minio_root_password || random > minio_root_password
keep s3_credentials || printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
  "$(cat minio_root_user)" "$(cat minio_root_password)" > s3_credentials
keep proxies || printf '# one proxy URL per line, --- between tiers (see the README)\ndirect\n' > proxies
ls -l "$PWD"
