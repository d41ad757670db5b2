"""Who a caller is (bearer tokens) and what it may do (roles, projects)."""
