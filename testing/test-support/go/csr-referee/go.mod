module ccm.test/csr-referee

go 1.22
