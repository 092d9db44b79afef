-- A bare profile of a new id, what the kit's own tests write to see where
-- it lands.
INSERT INTO user_profiles (user_id) VALUES (gen_random_uuid())
RETURNING user_id::text
