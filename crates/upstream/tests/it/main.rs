mod smoke {
    #[test]
    fn builds() {}
}
