"""``python -m scalesched.cluster > docs/cluster-schema.json``: print the cluster-file schema."""

import sys

from scalesched.cluster.spec import cluster_schema_json

sys.stdout.write(cluster_schema_json())
